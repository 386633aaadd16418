"""The leakage guard shared by every trained artifact (learned fusion, cross-encoder folds).

A model trained or selected on some labelled queries may score a query only if it never saw it:
the query id is in neither its training nor its selection (dev) set, its scope is not one of the
scopes those sets came from when folds group whole scopes, and, for k-fold models, the query is in
the fold's held-out set. Asking for a query no model may score raises :class:`LeakageError`.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence


class LeakageError(RuntimeError):
    """A trained model was asked to score a query it was trained or selected on."""


def may_score(
    query_id: str,
    scope_id: str | None,
    train_ids: Collection[str],
    dev_ids: Collection[str],
    heldout_ids: Collection[str] | None,
    scopes: Collection[str] = (),
) -> bool:
    """Whether a model trained on ``train_ids`` and selected on ``dev_ids`` (drawn from ``scopes`` when
    folds group scopes) may score ``query_id``; ``heldout_ids`` (k-fold) are the only queries it is for,
    ``None`` = any query it never saw."""
    if query_id in train_ids or query_id in dev_ids:
        return False
    if scope_id is not None and scope_id in scopes:
        return False
    return heldout_ids is None or query_id in heldout_ids


def pick_fold(allowed: Sequence[bool], query_id: str | None, scope_id: str | None, what: str) -> int:
    """The first fold allowed to score the query (``allowed[i]``: :func:`may_score` of fold i)."""
    if query_id is None:
        raise LeakageError(f"{what} needs the query id to prove it was not trained on the query")
    for i, ok in enumerate(allowed):
        if ok:
            return i
    raise LeakageError(f"query {query_id} (scope {scope_id}) was used to train or select every {what} fold")
