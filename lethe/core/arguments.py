"""The command line of every entry point, checked before Hydra reads it: no credential (Hydra's records and errors
would keep it) and every ``key=value`` override parseable, refused with a message that names the override and key
(Hydra's own parse error names neither, e.g. ``no viable alternative at input '[conv-26'``)."""

from __future__ import annotations

from collections.abc import Sequence

from lethe.core.secrets import refuse_secret_arguments
from lethe.core.targets import refuse_target_arguments


def check_arguments(argv: Sequence[str]) -> None:
    """Exit (status 1, a message on stderr) on a credential in ``argv``, a ``_target_`` outside the project's packages
    (lethe.core.targets) or an override Hydra cannot parse."""
    refuse_secret_arguments(argv)
    refuse_target_arguments(argv)
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import OverrideParseException

    parser = OverridesParser.create()
    for arg in argv:
        if arg.startswith("-") or "=" not in arg:  # flags (-m, --config-dir <dir>) and their values
            continue
        try:
            parser.parse_overrides([arg])
        except OverrideParseException as exc:
            key = arg.split("=", 1)[0].lstrip("+~")
            reason = str(exc).split("\n")[0].strip()
            raise SystemExit(
                f"Error: the override {arg!r} (key {key}) cannot be parsed: {reason}. Lists are "
                f"written [a,b] and quoted for the shell, e.g. '{key}=[a,b]'; a value with spaces or "
                "special characters is quoted inside too, e.g. 'key=\"a b\"'"
            ) from None
