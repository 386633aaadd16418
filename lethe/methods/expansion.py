"""Query expansion methods: HyDE, LightRAG-style keywords, and the adaptive exact-match keyword boost.

All three implement ``lethe.core.protocol.Method`` over the project's building blocks: one embedder and
``DenseIndex`` (exact cosine), ``BM25Index`` (Lucene-exact BM25), ``lethe.retrieval.fusion`` (RRF, min-max).
LLM calls go through ``lethe.stages.understanding.llm.ask`` with versioned prompts
(``lethe/llm/prompts/``) and strict parsers (``lethe.llm.parsing``).

LLM failures are never silent. When a call times out (``LLMTimeout``), fails (``LLMError``) or its
output is rejected (``ParseError``), the method uses the plain query for that part and records it
in the query's ``flags``:

- ``llm_calls`` / ``llm_cached``: LLM calls made for this query / served from the response cache;
- ``llm_fallback``: ``["<component>:<cause>", ...]`` (cause ``timeout``, ``error``, ``parse``),
  empty when every call succeeded; ``llm_failure_detail``: component -> parse reason or error text.

``describe()`` carries the counters per component (calls, cache hits, timeouts, errors, parse
failures per reason, fallbacks, per-call latency), the prompts (name, version, sha256) and the LLM's
``describe()``. ``timings_ms`` has ``llm`` (wall time of the LLM calls, failed ones included) apart
from ``encode_query`` (every text embedded for the query: the query, a hypothetical answer,
keywords), ``retrieval`` (cosine scoring and top-k) and ``fusion``; ``KeywordBoostSearch`` adds
``detect`` (term detection minus LLM time) and ``bm25``, and has no ``llm`` stage with the heuristic
detector (it never builds nor calls an LLM).

The LLM is passed in built (an ``LLMBackend``) or as its config mapping, then built with
``lethe.llm.backends.make_llm(cfg, cache_dir)``; ``close()`` closes it only in the second case.

Methods
-------

``HyDESearch`` (Gao et al., 2023, *Precise Zero-Shot Dense Retrieval without Relevance Labels*):
the LLM writes a hypothetical answer passage (``hyde.v1``); the docs are ranked by cosine with
``mode="answer_only"``: the answer vector alone, or ``mode="average"`` (default): the normalized
mean of the query and answer vectors (HyDE's own estimate averages the query with its generated
documents). The query is embedded with role ``query``; the answer with ``answer_role`` (default
``doc``), because it is a document-like passage and HyDE encodes it with the *document* encoder:
for embedders with role prompts (E5 "query:"/"passage:") it must get the passage prompt. With
MiniLM both roles encode alike; the one difference is that ``doc`` vectors go to the embedding
cache, so a repeated answer is a cache hit (flagged ``answer_embedding_cached``). On failure
(or an answer that fails the parser) the plain query vector ranks alone.

``KeywordSearch`` (LightRAG keyword extraction, Guo et al., 2024; with the hypothetical answer of
``../shared/seeds/003``): the LLM extracts high- and low-level keywords (``keywords.v1``); the
keywords of the configured ``levels`` (low first, then high, LightRAG's "local" = low only,
"hybrid" = both) are joined with ", " and embedded as a query; with ``with_answer`` a HyDE answer
(``hyde.v1``) is a third list. Each text ranks the docs by cosine (top ``depth``); the lists of
the plain query, the keywords and the answer are fused by RRF (``fusion="rrf"``, constant
``rrf_k``) or by the mean of their cosines over all docs (``fusion="mean"``). A failed part is left
out (flagged); with only the plain query left, the ranking is plain vector search. With
``constrained`` (the default) the keywords are decoded under ``keywords_schema(max_keywords)``:
small models otherwise repeat a list until ``max_tokens`` cuts the JSON (a parse failure); the
parser checks the output either way. The hypothetical answer is never constrained.

``KeywordBoostSearch`` (adaptive exact-match boost, ``../shared/seeds/001`` sections 5-6): the
exact-match terms of the query are detected by ``detector="heuristic"``
(``lethe.text.entities.exact_terms``, no LLM) or ``"llm"`` (``exact_terms.v1``; terms not literally in
the query are dropped and flagged ``hallucinated_terms``; the boost runs only if the model says
``use_keyword_boost`` and a term survives). Without terms the result is plain vector search: same
ranking and scores, no BM25, no extra latency. With terms, the candidates are the dense top
``depth`` plus, with ``add_bm25_hits``, the BM25 top ``depth`` docs matching the terms (BM25 over the
terms joined by spaces); each doc scores ``(1 - weight) * cosine + weight * keyword`` where keyword is
``keyword_score="bm25"``: BM25 of the terms divided by the best candidate's BM25 (0 without a
match, 1 for the best), or ``"match"``: the share of the terms the doc contains (case-insensitive
substring). Docs outside the candidates keep ``(1 - weight) * cosine`` (which orders them below
every candidate). The default weight 0.3 is the study's recommended ``CC_ALPHA = 0.7`` semantic
share. With ``importance_weights`` (``{low, medium, high}`` -> weight; the LLM detector with ``exact_terms.v2``), each
boosted query's weight is the one of the ``keyword_importance`` the model gave ("none" = no boost; the seed's
adaptive alpha, section 12 "Option 2"). When the LLM detector fails the query gets no boost (``fallback_detector="none"``, the
plain query) or the heuristic's terms (``"heuristic"``); either way it is flagged.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from lethe.core.protocol import Doc, Query, SearchResult, count_fallback_causes, record_llm_failures
from lethe.llm.base import Decoding, LLMBackend
from lethe.llm.parsing import (
    ExactTerms,
    Keywords,
    keywords_schema,
    normalize,
    parse_exact_terms,
    parse_keywords,
    parse_passage,
)
from lethe.llm.prompts import load_prompt
from lethe.retrieval.bm25 import BM25Index
from lethe.retrieval.dense import DenseIndex, make_embedder
from lethe.retrieval.embedder import Embedder
from lethe.retrieval.fusion import rrf
from lethe.retrieval.ranking import top_indices, top_k
from lethe.stages.boost import MetadataBoost, QuerySignals
from lethe.stages.understanding.llm import CallStats, Outcome, as_decoding, ask, build_llm
from lethe.text.entities import exact_terms

__all__ = ["HyDESearch", "KeywordSearch", "KeywordBoostSearch", "DEFAULT_DECODING"]

DEFAULT_DECODING = Decoding(max_tokens=160)
_ROLES = ("query", "doc")
_STAGES = ("llm", "encode_query", "retrieval", "fusion")


_MATCH_SHARE = MetadataBoost(enabled=True, exact=1.0, kind=0.0, kind_affinity={})


def _ms(t0: float) -> float:
    return (time.perf_counter() - t0) * 1e3


class _ExpansionMethod:
    """Shared plumbing: embedder + dense index, the LLM, prompts, per-component counters and flags."""

    name = "expansion"

    def __init__(
        self,
        embedder: Mapping[str, Any] | Embedder,
        llm: LLMBackend | Mapping[str, Any] | None,
        components: Sequence[str],
        timeout_s: float | None,
        decoding: Decoding | Mapping[str, Any] | None,
        prompts: Mapping[str, str] | None,
        cache_dir: str | Path | None,
        progress: bool,
    ) -> None:
        self.dense = DenseIndex(make_embedder(embedder, cache_dir, progress))
        self.components = tuple(components)
        self.timeout_s = None if timeout_s is None else float(timeout_s)
        self.decoding = as_decoding(decoding, DEFAULT_DECODING)
        versions = dict(prompts or {})
        unknown = sorted(set(versions) - set(self.components))
        if unknown:
            raise ValueError(f"prompts: {self.name} uses no prompt {unknown}; it uses {list(self.components)}")
        self.prompts = {c: load_prompt(c, versions.get(c, "v1")) for c in self.components}  # component = prompt name
        self.stats = {c: CallStats() for c in self.components}
        if self.components and llm is None:
            raise ValueError(f"{self.name} needs an llm (an LLMBackend or its config)")
        self._owns_llm = bool(self.components) and isinstance(llm, Mapping)
        self.llm = build_llm(llm, cache_dir) if self.components else None  # type: ignore[arg-type]

    @property
    def embedder(self) -> Embedder:
        return self.dense.embedder

    def index(self, docs: Sequence[Doc]) -> None:
        self.dense.fit([d.doc_id for d in docs], [d.text for d in docs])

    @staticmethod
    def _new_query() -> tuple[dict[str, float], dict[str, Any]]:
        return {s: 0.0 for s in _STAGES}, {"llm_calls": 0, "llm_cached": 0, "llm_fallback": []}

    def _ask(
        self,
        component: str,
        parse: Callable[[str], Any],
        timings: dict[str, float],
        flags: dict[str, Any],
        decoding: Decoding | None = None,
        **values: Any,
    ) -> Outcome:
        """One LLM round trip for ``component`` (``decoding``: default ``self.decoding``); its time, cache use
        and any failure go to the query."""
        assert self.llm is not None
        out = ask(
            self.llm,
            self.prompts[component],
            parse,
            decoding or self.decoding,
            self.timeout_s,
            self.stats[component],
            **values,
        )
        timings["llm"] += out.latency_ms
        flags["llm_calls"] += 1
        flags["llm_cached"] += int(out.cached)
        record_llm_failures(flags, *count_fallback_causes([] if out.ok else [str(out.cause)]))
        if not out.ok:
            self.stats[component].fallbacks += 1
            flags["llm_fallback"].append(f"{component}:{out.cause}")
            flags.setdefault("llm_failure_detail", {})[component] = out.reason
        return out

    def _encode(self, text: str, role: str) -> tuple[np.ndarray, bool]:
        v = self.embedder.encode([text], role=role)[0]  # type: ignore[arg-type]
        return v, self.embedder.last_cache_hits > 0

    def _describe_llm(self) -> dict[str, Any]:
        return {
            "timeout_s": self.timeout_s,
            "decoding": self.decoding.as_dict(),
            "prompts": {c: p.describe() for c, p in self.prompts.items()},
            "llm": self.llm.describe() if self.llm is not None else None,
            "counters": {c: s.as_dict() for c, s in self.stats.items()},
        }

    def close(self) -> None:
        self.embedder.flush()
        if self.llm is not None and self._owns_llm:
            self.llm.close()


class HyDESearch(_ExpansionMethod):
    """Dense retrieval with a hypothetical answer (see the module docstring)."""

    name = "hyde"

    def __init__(
        self,
        embedder: Mapping[str, Any] | Embedder,
        llm: LLMBackend | Mapping[str, Any],
        mode: str = "average",
        answer_role: str = "doc",
        timeout_s: float | None = 30.0,
        decoding: Decoding | Mapping[str, Any] | None = None,
        prompts: Mapping[str, str] | None = None,
        max_answer_chars: int = 2000,
        name: str = "hyde",
        cache_dir: str | Path | None = None,
        progress: bool = True,
    ) -> None:
        if mode not in ("average", "answer_only"):
            raise ValueError(f"mode must be 'average' or 'answer_only', got {mode!r}")
        if answer_role not in _ROLES:
            raise ValueError(f"answer_role must be one of {_ROLES}, got {answer_role!r}")
        self.name = name
        self.mode, self.answer_role, self.max_answer_chars = mode, answer_role, int(max_answer_chars)
        super().__init__(embedder, llm, ("hyde",), timeout_s, decoding, prompts, cache_dir, progress)

    def search(self, query: Query, k: int) -> SearchResult:
        timings, flags = self._new_query()
        out = self._ask("hyde", lambda t: parse_passage(t, self.max_answer_chars), timings, flags, query=query.text)
        t0 = time.perf_counter()
        qv = av = None
        if self.mode == "average" or not out.ok:
            qv, flags["query_embedding_cached"] = self._encode(query.text, "query")
        if out.ok:
            av, flags["answer_embedding_cached"] = self._encode(out.value, self.answer_role)
        timings["encode_query"] = _ms(t0)
        t1 = time.perf_counter()
        if qv is not None and av is not None:
            s = qv + av
            n = float(np.linalg.norm(s))
            v = s / n if n > 0 else qv
        else:
            v = av if av is not None else qv
        timings["fusion"] = _ms(t1)
        t2 = time.perf_counter()
        scores = self.dense.scores(v)
        idx = top_indices(scores, k)
        ranking = [(self.dense.ids[i], float(scores[i])) for i in idx]
        timings["retrieval"] = _ms(t2)
        flags.update({"hyde_mode": self.mode, "hyde_used": out.ok, "hyde_answer": out.value if out.ok else None})
        return SearchResult(ranking, timings, flags)

    def describe(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "method": "hyde",
            "mode": self.mode,
            "answer_role": self.answer_role,
            "max_answer_chars": self.max_answer_chars,
            **self._describe_llm(),
            "embedder": self.embedder.stats(),
        }


class KeywordSearch(_ExpansionMethod):
    """Dense retrieval over LLM keywords (and a hypothetical answer), fused with the query."""

    name = "keywords"

    def __init__(
        self,
        embedder: Mapping[str, Any] | Embedder,
        llm: LLMBackend | Mapping[str, Any],
        with_answer: bool = False,
        levels: Sequence[str] = ("low", "high"),
        fusion: str = "rrf",
        rrf_k: int = 60,
        depth: int = 100,
        answer_role: str = "doc",
        timeout_s: float | None = 30.0,
        decoding: Decoding | Mapping[str, Any] | None = None,
        prompts: Mapping[str, str] | None = None,
        max_keywords: int = 10,
        max_answer_chars: int = 2000,
        constrained: bool = True,
        name: str = "keywords",
        cache_dir: str | Path | None = None,
        progress: bool = True,
    ) -> None:
        levels = tuple(levels)
        if not levels or any(lv not in ("low", "high") for lv in levels) or len(set(levels)) != len(levels):
            raise ValueError(f"levels must be a non-empty subset of ['low', 'high'], got {list(levels)}")
        if fusion not in ("rrf", "mean"):
            raise ValueError(f"fusion must be 'rrf' or 'mean', got {fusion!r}")
        if answer_role not in _ROLES:
            raise ValueError(f"answer_role must be one of {_ROLES}, got {answer_role!r}")
        self.name = name
        self.with_answer, self.levels, self.fusion = bool(with_answer), levels, fusion
        self.rrf_k, self.depth, self.answer_role = int(rrf_k), int(depth), answer_role
        self.max_keywords, self.max_answer_chars = int(max_keywords), int(max_answer_chars)
        comps = ("keywords", "hyde") if self.with_answer else ("keywords",)
        super().__init__(embedder, llm, comps, timeout_s, decoding, prompts, cache_dir, progress)
        self.constrained = bool(constrained)
        self.keyword_decoding = (
            replace(self.decoding, json_schema=keywords_schema(self.max_keywords))
            if self.constrained
            else self.decoding
        )

    def keyword_text(self, kw: Keywords) -> str:
        """The configured levels' keywords, low before high, joined by ", " (duplicates dropped)."""
        words = [*(kw.low if "low" in self.levels else ()), *(kw.high if "high" in self.levels else ())]
        return ", ".join(_dedupe(words))

    def search(self, query: Query, k: int) -> SearchResult:
        timings, flags = self._new_query()
        kw = self._ask(
            "keywords",
            lambda t: parse_keywords(t, self.max_keywords),
            timings,
            flags,
            self.keyword_decoding,
            query=query.text,
        )
        ans = (
            self._ask("hyde", lambda t: parse_passage(t, self.max_answer_chars), timings, flags, query=query.text)
            if self.with_answer
            else None
        )
        texts: list[tuple[str, str, str]] = [("query", query.text, "query")]
        if kw.ok:
            flags["keywords"] = kw.value.as_record()
            joined = self.keyword_text(kw.value)
            if joined:
                texts.append(("keywords", joined, "query"))
        if ans is not None:
            flags["hyde_answer"] = ans.value if ans.ok else None
            if ans.ok:
                texts.append(("answer", ans.value, self.answer_role))
        t0 = time.perf_counter()
        vecs = []
        for label, text, role in texts:
            v, cached = self._encode(text, role)
            vecs.append(v)
            if label == "query":
                flags["query_embedding_cached"] = cached
        timings["encode_query"] = _ms(t0)
        t1 = time.perf_counter()
        ids = self.dense.ids
        scores = [self.dense.scores(v) for v in vecs]
        tops = [top_indices(s, self.depth) for s in scores] if self.fusion == "rrf" and len(vecs) > 1 else []
        timings["retrieval"] = _ms(t1)
        t2 = time.perf_counter()
        if len(vecs) == 1:
            ranking = [(ids[i], float(scores[0][i])) for i in top_indices(scores[0], k)]
        elif self.fusion == "rrf":
            ranking = top_k(rrf([[ids[i] for i in t] for t in tops], self.rrf_k), k)
        else:
            mean = np.mean(np.stack(scores), axis=0)
            ranking = [(ids[i], float(mean[i])) for i in top_indices(mean, k)]
        timings["fusion"] = _ms(t2)
        flags["fused_lists"] = [label for label, _, _ in texts]
        return SearchResult(ranking, timings, flags)

    def describe(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "method": "keywords",
            "with_answer": self.with_answer,
            "levels": list(self.levels),
            "fusion": self.fusion,
            "rrf_k": self.rrf_k,
            "depth": self.depth,
            "answer_role": self.answer_role,
            "max_keywords": self.max_keywords,
            "constrained": self.constrained,
            "keyword_decoding": self.keyword_decoding.as_dict(),
            **self._describe_llm(),
            "embedder": self.embedder.stats(),
        }


def _dedupe(words: Sequence[str]) -> list[str]:
    seen: set[str] = set()
    out = []
    for w in words:
        if normalize(w) not in seen:
            seen.add(normalize(w))
            out.append(w)
    return out


class KeywordBoostSearch(_ExpansionMethod):
    """Vector search with an exact-match keyword boost only when the query has such terms."""

    name = "keyword_boost"

    def __init__(
        self,
        embedder: Mapping[str, Any] | Embedder,
        detector: str = "heuristic",
        llm: LLMBackend | Mapping[str, Any] | None = None,
        weight: float = 0.3,
        keyword_score: str = "bm25",
        add_bm25_hits: bool = True,
        depth: int = 100,
        k1: float = 1.2,
        b: float = 0.75,
        fallback_detector: str = "none",
        timeout_s: float | None = 30.0,
        decoding: Decoding | Mapping[str, Any] | None = None,
        prompts: Mapping[str, str] | None = None,
        max_terms: int = 10,
        importance_weights: Mapping[str, float] | None = None,
        name: str = "keyword_boost",
        cache_dir: str | Path | None = None,
        progress: bool = True,
    ) -> None:
        if detector not in ("heuristic", "llm"):
            raise ValueError(f"detector must be 'heuristic' or 'llm', got {detector!r}")
        if keyword_score not in ("bm25", "match"):
            raise ValueError(f"keyword_score must be 'bm25' or 'match', got {keyword_score!r}")
        if fallback_detector not in ("none", "heuristic"):
            raise ValueError(f"fallback_detector must be 'none' or 'heuristic', got {fallback_detector!r}")
        if not 0.0 <= float(weight) <= 1.0:
            raise ValueError(f"weight must be in [0, 1], got {weight}")
        self.importance_weights = self._check_importance_weights(importance_weights, detector)
        self.name = name
        self.detector, self.weight, self.keyword_score = detector, float(weight), keyword_score
        self.add_bm25_hits, self.depth, self.k1, self.b = bool(add_bm25_hits), int(depth), float(k1), float(b)
        self.fallback_detector, self.max_terms = fallback_detector, int(max_terms)
        # the heuristic detector never builds nor calls an LLM, even when one is configured
        super().__init__(
            embedder,
            llm if detector == "llm" else None,
            ("exact_terms",) if detector == "llm" else (),
            timeout_s,
            decoding,
            prompts,
            cache_dir,
            progress,
        )
        self.bm25 = BM25Index(self.k1, self.b)
        self.texts_lower: list[str] = []

    def index(self, docs: Sequence[Doc]) -> None:
        texts = [d.text for d in docs]
        super().index(docs)
        self.bm25 = BM25Index(self.k1, self.b).fit(texts)
        self.texts_lower = [t.lower() for t in texts]

    @staticmethod
    def _check_importance_weights(weights: Mapping[str, float] | None, detector: str) -> dict[str, float] | None:
        if weights is None:
            return None
        if detector != "llm":
            raise ValueError("importance_weights needs detector='llm' (the model rates keyword_importance)")
        w = {str(k): float(v) for k, v in dict(weights).items()}
        if set(w) != {"low", "medium", "high"} or not all(0.0 <= v <= 1.0 for v in w.values()):
            raise ValueError(f"importance_weights must map low, medium and high to weights in [0, 1], got {weights}")
        return w

    @staticmethod
    def heuristic_terms(text: str) -> tuple[str, ...]:
        """``lethe.text.entities.exact_terms`` of ``text``, deduplicated case-insensitively."""
        return tuple(_dedupe([t for _, t in exact_terms(text)]))

    def detect(self, query: Query, timings: dict[str, float], flags: dict[str, Any]) -> tuple[str, ...]:
        """The exact-match terms to boost (empty: no boost)."""
        if self.detector == "heuristic":
            return self.heuristic_terms(query.text)
        out = self._ask(
            "exact_terms", lambda t: parse_exact_terms(t, query.text, self.max_terms), timings, flags, query=query.text
        )
        if not out.ok:
            return self.heuristic_terms(query.text) if self.fallback_detector == "heuristic" else ()
        et: ExactTerms = out.value
        flags["hallucinated_terms"] = list(et.dropped)
        flags["llm_use_keyword_boost"] = et.model_flag
        flags["keyword_importance"] = et.importance
        return et.terms if et.use_boost else ()

    def query_weight(self, flags: Mapping[str, Any]) -> float:
        """The keyword weight of this query: ``weight``, or with ``importance_weights`` the weight of the importance
        the model gave (a reply without one keeps ``weight`` and is flagged ``importance_missing``)."""
        if self.importance_weights is None:
            return self.weight
        level = flags.get("keyword_importance")
        if level not in self.importance_weights:
            return self.weight
        return self.importance_weights[level]

    def search(self, query: Query, k: int) -> SearchResult:
        timings, flags = self._new_query()
        if self.detector == "heuristic":
            del timings["llm"]  # no LLM in this configuration
        t0 = time.perf_counter()
        terms = self.detect(query, timings, flags)
        timings["detect"] = _ms(t0) - timings.get("llm", 0.0)
        t1 = time.perf_counter()
        qv, flags["query_embedding_cached"] = self._encode(query.text, "query")
        timings["encode_query"] = _ms(t1)
        t2 = time.perf_counter()
        cos = self.dense.scores(qv)
        flags.update({"detector": self.detector, "exact_terms": list(terms), "keyword_boost": bool(terms)})
        if not terms:  # plain vector search: same ranking and scores as baselines.vector
            idx = top_indices(cos, k)
            ranking = [(self.dense.ids[i], float(cos[i])) for i in idx]
            timings["retrieval"] = _ms(t2)
            timings["bm25"] = 0.0
            return SearchResult(ranking, timings, flags)
        dense_top = top_indices(cos, self.depth)
        timings["retrieval"] = _ms(t2)
        t3 = time.perf_counter()
        lex = self.bm25.score(" ".join(terms))
        matches = np.flatnonzero(lex > 0)
        cand = dense_top
        if self.add_bm25_hits and matches.size:
            cand = np.union1d(dense_top, top_indices(np.where(lex > 0, lex, -np.inf), min(self.depth, matches.size)))
        timings["bm25"] = _ms(t3)
        t4 = time.perf_counter()
        if self.keyword_score == "bm25":
            best = float(lex[cand].max()) if cand.size else 0.0
            kw = lex[cand].astype(np.float64) / best if best > 0 else np.zeros(cand.size)
        else:  # share of the terms found in the doc: the exact-match part of Lethe's metadata boost
            sig = QuerySignals(tuple(t.lower() for t in terms), frozenset())
            kw = _MATCH_SHARE.scores(sig, [self.texts_lower[i] for i in cand], [""] * cand.size)
        weight = self.query_weight(flags)
        if self.importance_weights is not None:
            flags["weight"] = weight
            flags["importance_missing"] = flags.get("keyword_importance") not in self.importance_weights
        fused = (1.0 - weight) * cos.astype(np.float64)
        fused[cand] += weight * kw
        idx = top_indices(fused, k)
        ranking = [(self.dense.ids[i], float(fused[i])) for i in idx]
        timings["fusion"] = _ms(t4)
        flags.update(
            {"bm25_matches": int(matches.size), "boosted": int(np.count_nonzero(kw > 0)), "candidates": int(cand.size)}
        )
        return SearchResult(ranking, timings, flags)

    def describe(self) -> dict[str, Any]:
        out = {
            "name": self.name,
            "method": "keyword_boost",
            "detector": self.detector,
            "weight": self.weight,
            "importance_weights": self.importance_weights,
            "keyword_score": self.keyword_score,
            "add_bm25_hits": self.add_bm25_hits,
            "depth": self.depth,
            "fallback_detector": self.fallback_detector,
            "bm25": {
                "implementation": "lethe.retrieval.bm25.BM25Index (Lucene-compatible)",
                "k1": self.k1,
                "b": self.b,
            },
            "embedder": self.embedder.stats(),
        }
        if self.detector == "llm":
            out.update(self._describe_llm())
        return out
