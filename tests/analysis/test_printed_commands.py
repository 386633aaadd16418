"""Every command the report and the results site print runs (issue 56 item 7), checked without running anything:
its ``python -m`` module exists and is a Hydra entry point, every override parses (the entry point's own
``check_arguments``), its top config composes with the overrides through Hydra's compose API, and a reproduce command's
``select`` names a declared run or study of its tier (what ``experiments.reproduce.resolve_tiers`` refuses).

The commands are built with the functions that print them, from the committed reference store and the tiers of
conf/reference/: the report's Studies section (``experiments.study_jobs.publish_studies``) and the site's commands
(``analysis.site.command`` for every declared run and study of every tier, ``store_command``, ``REPORT_COMMAND``, a study
page's own stored command line through ``printed_command``), plus the commands in the stored studies' Markdown pages
(linked from the report, shown on the site) and every command of the committed ``results/report.md`` and
``results/seeds/report.md`` (their prose prints fixed commands). Placeholders (``<results_dir>`` ...) become folders of
a temporary directory. A stored command naming a moved module fails, and is printed through ``analysis.site``'s
``MOVED_MODULES`` map (tested both ways)."""

from __future__ import annotations

import importlib.util
import re
import shlex
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from omegaconf import DictConfig, OmegaConf

from analysis import site as S
from experiments import reference_store as RS
from experiments.reference import NOT_TIERS, Tier, load_tier, select_with_studies, tier_names
from lethe.core.arguments import check_arguments
from lethe.core.paths import CONF_DIR, PROJECT_ROOT, machine_roots
from lethebench.studies import StudyFolder

RESULTS = PROJECT_ROOT / "results"
STORE = RESULTS / "reference"
COMMITTED_REPORTS = (RESULTS / "report.md", RESULTS / "seeds" / "report.md")
CODE_COMMAND = re.compile(r"`(python -m [^`]+)`")  # a command in a Markdown code span
STUDY_LINE = re.compile(r"^- \[`([^`]+)`\]\([^)]*\) \(tier (\w+)\): `(.+)`$")  # publish_studies' line
HYDRA_MAIN = re.compile(r'@hydra\.main\([^)]*config_name="(\w+)"')
MAIN_GUARD = 'if __name__ == "__main__"'
PLACEHOLDER = re.compile(r"<(\w+)>")
# the tokens the store writes for a machine's folders (experiments.reference_store.machine_roots)
TOKENS = {
    tok.strip("<>")
    for _, tok in machine_roots({"results_dir": "r", "cache_dir": "c", "data": {"processed": "p", "root": "d"}})
}


@cache
def _tier(name: str, reference_dir: str) -> Tier:
    return load_tier(name, reference_dir)


def all_tiers() -> list[Tier]:
    """Every tier of conf/reference/ (the reference tiers, smoke, and any other), as the project loads them."""
    names = [p.stem for p in sorted((CONF_DIR / "reference").glob("*.yaml")) if p.stem not in NOT_TIERS]
    return [_tier(n, "conf/reference") for n in names]


class CommandChecker:
    """Checks a printed command line without running it (:meth:`problems`).

    Composing the reproduce config takes about half a second, and the site prints one reproduce command per
    declared run (some 300), which differ only in the values of ``tier`` and ``select``. So a command is composed
    in full by Hydra's compose API when its form (top config, config-group and other structural overrides, and the
    keys of its plain value overrides) is new; a later command of the same form has its value overrides applied to
    that composed config by Hydra's own step for them (``ConfigLoaderImpl._apply_overrides_to_config``, which fails
    as compose does on an unknown key)."""

    def __init__(self, tmp: Path):
        self.tmp = tmp
        self.groups: dict[str, set[str]] = {}  # top config -> its config groups
        self.forms: dict[tuple, DictConfig] = {}

    def problems(self, command: str) -> list[str]:
        """Why ``command`` would not run ([] when it would)."""
        try:
            words = shlex.split(command)
        except ValueError as exc:
            return [f"not a shell command line: {exc}"]
        if len(words) < 3 or words[:2] != ["python", "-m"]:
            return ["not `python -m <module> [key=value ...]`"]
        module, args = words[2], words[3:]
        try:
            spec = importlib.util.find_spec(module)
        except ModuleNotFoundError:
            spec = None
        if spec is None or spec.origin is None:
            return [f"no module {module}"]
        source = Path(spec.origin).read_text()
        main = HYDRA_MAIN.search(source)
        if main is None or MAIN_GUARD not in source:
            return [f"{module} is not a Hydra entry point run by python -m"]
        unknown = sorted(set(PLACEHOLDER.findall(" ".join(args))) - TOKENS)
        if unknown:
            return [f"unknown placeholders {unknown} (known: {sorted(TOKENS)})"]
        overrides = [PLACEHOLDER.sub(lambda t: str(self.tmp / t.group(1)), a) for a in args]
        try:
            check_arguments(overrides)
        except SystemExit as exc:
            return [str(exc)]
        name = main.group(1)
        try:
            cfg = self.compose(name, overrides)
        except Exception as exc:  # noqa: BLE001 - any failure to compose is the finding
            return [f"conf/{name}.yaml does not compose with {overrides}: {type(exc).__name__}: {exc}"]
        if module == "experiments.reproduce":
            return self.selection_problems(cfg)
        return []

    def compose(self, name: str, overrides: list[str]) -> DictConfig:
        """``conf/<name>.yaml`` with ``overrides``, as the entry point composes it (Hydra's part included); raises as
        Hydra does. Call inside an initialized Hydra (:func:`hydra_on_conf`)."""
        from hydra import compose
        from hydra._internal.config_loader_impl import ConfigLoaderImpl
        from hydra.core.override_parser.overrides_parser import OverridesParser

        parsed = OverridesParser.create().parse_overrides(overrides)
        groups = self.groups.get(name)
        if groups is not None:
            cfg = self.forms.get(self._form(name, parsed, groups))
            if cfg is not None:
                ConfigLoaderImpl._apply_overrides_to_config([o for o in parsed if self._plain(o, groups)], cfg)
                return cfg
        cfg = compose(config_name=name, overrides=overrides, return_hydra_config=True)
        OmegaConf.to_container(OmegaConf.masked_copy(cfg, [k for k in cfg if k != "hydra"]), resolve=True)
        groups = self.groups.setdefault(name, {str(k).split("@")[0] for k in cfg.hydra.runtime.choices})
        self.forms[self._form(name, parsed, groups)] = cfg
        return cfg

    @classmethod
    def _form(cls, name: str, parsed: list[Any], groups: set[str]) -> tuple:
        """What decides the composed config's shape: the top config, every override that is not a plain value
        override (as written), and the keys of the plain ones."""
        rest = tuple(o.input_line for o in parsed if not cls._plain(o, groups))
        return name, rest, tuple(sorted(o.key_or_group for o in parsed if cls._plain(o, groups)))

    @staticmethod
    def _plain(o: Any, groups: set[str]) -> bool:
        """A plain value override: ``key=value`` of a key that is not a config group (no +, ++, ~, sweep, package)."""
        from hydra.core.override_parser.types import OverrideType

        return (
            o.type == OverrideType.CHANGE
            and o.package is None
            and not o.is_sweep_override()
            and not o.is_hydra_override()
            and o.key_or_group not in groups
        )

    @staticmethod
    def selection_problems(cfg: DictConfig) -> list[str]:
        """A reproduce config whose tier does not exist or whose ``select`` names nothing declared in it (the
        checks ``experiments.reproduce.resolve_tiers`` makes before composing any run)."""
        try:
            tiers = [_tier(n, str(cfg.reference_dir)) for n in tier_names(str(cfg.tier))]
            select_with_studies(
                [r for t in tiers for r in t.runs],
                [st for t in tiers for st in t.studies],
                list(cfg.select) if cfg.select else [],
            )
        except (FileNotFoundError, ValueError) as exc:
            return [f"tier={cfg.tier} select={cfg.select}: {exc}"]
        return []


class hydra_on_conf:
    """Hydra initialized on conf/ for the checker's composes (cleared before and after)."""

    def __enter__(self) -> None:
        from hydra import initialize_config_dir
        from hydra.core.global_hydra import GlobalHydra

        GlobalHydra.instance().clear()
        self._init = initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3")
        self._init.__enter__()

    def __exit__(self, *exc: object) -> None:
        from hydra.core.global_hydra import GlobalHydra

        self._init.__exit__(*exc)
        GlobalHydra.instance().clear()


def check_all(commands: list[tuple[str, str]], tmp: Path) -> dict[str, list[str]]:
    """``{command: its problems}`` of every distinct command of ``commands`` ((where printed, command) pairs) that
    would not run."""
    checker = CommandChecker(tmp)
    with hydra_on_conf():
        found = {cmd: checker.problems(cmd) for cmd in dict.fromkeys(c for _, c in commands)}
    return {cmd: p for cmd, p in found.items() if p}


def report_study_lines(out_dir: Path) -> list[tuple[str, str]]:
    """(where, command) of every study line of the Studies section the report prints (``publish_studies``, as
    ``make report`` calls it: every tier, from the reference store), for every report group with studies."""
    from experiments.reproduce import load
    from experiments.study_jobs import publish_studies

    cfg = load(["tier=all", "source=store"])
    out = []
    for report in dict.fromkeys(t.report for t in all_tiers() if t.studies):
        for line in publish_studies(report, cfg, out_dir / report):
            m = STUDY_LINE.match(line)
            if m:
                out.append((f"report {report}, Studies: {m.group(1)} (tier {m.group(2)})", m.group(3)))
            else:
                assert line.endswith("not run (n/m†)"), line  # a study line either prints a command or says so
    return out


def site_commands() -> Iterator[tuple[str, str]]:
    """(where, command) of every command the site prints: each declared run's and study's (run pages, study pages,
    verification pages), each tier's store command, the index's report command and each stored study's own command
    line (its study page)."""
    yield "site index", S.REPORT_COMMAND
    for t in all_tiers():
        yield f"site verification/{t.name}", S.store_command(t.name)
        for r in t.runs:
            yield f"site run {t.name}/{r.key}", S.command(t.name, r.key)
        for st in t.studies:
            yield f"site study {t.name}/{st.name}", S.command(t.name, st.key)
            folder = StudyFolder(RS.study_folder(STORE, t.name, st.name))
            if folder.is_done and folder.command:
                yield f"site study {t.name}/{st.name}: its own command line", S.printed_command(folder.command)


def stored_study_page_commands() -> Iterator[tuple[str, str]]:
    """(where, command) of every command in a stored study's Markdown pages (the report links them, the site shows
    them)."""
    for t in all_tiers():
        for st in t.studies:
            folder = StudyFolder(RS.study_folder(STORE, t.name, st.name))
            for md in folder.tables if folder.is_done else []:
                for cmd in CODE_COMMAND.findall(md.read_text()):
                    yield f"{md.relative_to(PROJECT_ROOT)}", cmd


def markdown_commands(path: Path) -> list[tuple[str, str]]:
    """(where, command) of every ``python -m`` command in a Markdown file's code spans."""
    return [
        (f"{path.relative_to(PROJECT_ROOT)}:{i}", c)
        for i, line in enumerate(path.read_text().splitlines(), 1)
        for c in CODE_COMMAND.findall(line)
    ]


def _explain(bad: dict[str, list[str]], commands: list[tuple[str, str]]) -> str:
    where = {c: w for w, c in reversed(commands)}
    return "\n".join(f"{where[c]}: `{c}`: {'; '.join(p)}" for c, p in bad.items())


# ------------------------------------------------------------------------------------------------------------ tests
def test_the_checker_finds_a_moved_module_a_bad_override_an_undeclared_run_and_a_non_entry_point(tmp_path):
    checker = CommandChecker(tmp_path)
    with hydra_on_conf():
        ok = "python -m experiments.studies.judge_validation split=test dataset_folder=<processed>/locomo/x"
        assert checker.problems(ok) == []
        assert checker.problems(ok.replace("experiments.studies.", "analysis.")) == [
            "no module analysis.judge_validation"
        ]
        assert checker.problems("python -m no_such_package.judge_validation") == [
            "no module no_such_package.judge_validation"
        ]
        assert "is not a Hydra entry point" in checker.problems("python -m lethe.core.paths")[0]
        (bad,) = checker.problems("python -m experiments.studies.judge_validation no_such_option=1")
        assert "does not compose" in bad and "no_such_option" in bad
        assert "unknown placeholders ['nowhere']" in checker.problems(f"{ok} out_dir=<nowhere>/x")[0]
        assert checker.problems("python -m experiments.reproduce 'select=[a'") != []  # does not parse
        # the site's form: the first composed in full, the next through Hydra's value step on it
        assert checker.problems(S.command("core", "locomo/bm25")) == []
        (undeclared,) = checker.problems(S.command("core", "locomo/no_such_method"))
        assert "match no declared run" in undeclared
        assert checker.problems(S.command("judges", "study/judge_validation_locomo")) == []
        assert "no tier 'no_such_tier'" in checker.problems(S.command("no_such_tier", "locomo/bm25"))[0]
        assert checker.problems("python -m experiments.reproduce tier=core no_such_option=1") != []
        # a mapping override recorded unquoted (experiments.studies.common.command_line) is split by the shell;
        # printed_command quotes it
        stored = "python -m experiments.studies.pairwise_answers run_folders={a: <results_dir>/x, b: <results_dir>/y}"
        assert "cannot be parsed" in checker.problems(stored)[0]
        assert S.printed_command(stored) == stored.replace("run_folders={", "'run_folders={").replace("y}", "y}'")
        assert checker.problems(S.printed_command(stored)) == []


def test_a_stored_command_of_a_moved_module_fails_unless_printed_through_the_map(tmp_path, monkeypatch):
    """The judges tier's stored command lines name analysis.judge_validation (made before the LLM studies moved to
    experiments/studies/): without the map the report's Studies section prints them and the checker finds them;
    with it they run."""
    stale = {
        (t.name, st.name): folder.command
        for t in all_tiers()
        for st in t.studies
        if (folder := StudyFolder(RS.study_folder(STORE, t.name, st.name))).is_done
        and folder.command
        and shlex.split(folder.command)[2] in S.MOVED_MODULES
    }
    for old, new in S.MOVED_MODULES.items():
        assert S.printed_command(f"python -m {old} a=1 b=[c,d]") == f"python -m {new} a=1 b=[c,d]"
        assert importlib.util.find_spec(new) is not None and importlib.util.find_spec(old) is None, old
    assert S.printed_command("python -m experiments.reproduce tier=core") == "python -m experiments.reproduce tier=core"
    if not stale:
        pytest.skip("no stored command names a moved module (its tier was made again): the map is not needed")
    monkeypatch.setattr(S, "MOVED_MODULES", {})
    unmapped = report_study_lines(tmp_path)
    bad = check_all(unmapped, tmp_path)
    failing = {w.split(": ", 1)[1] for w, c in unmapped if c in bad}
    assert failing == {f"{name} (tier {tier})" for tier, name in stale}, _explain(bad, unmapped)
    assert all(p[0].startswith("no module analysis.") for p in bad.values()), bad
    # with the map the same lines run: test_every_command_the_report_and_the_site_print_runs


def test_every_command_the_report_and_the_site_print_runs(tmp_path):
    report = report_study_lines(tmp_path / "report")
    site = list(site_commands())
    pages = list(stored_study_page_commands())
    commands = report + site + pages
    declared = sum(len(t.runs) + len(t.studies) for t in all_tiers())
    stored = sum(StudyFolder(RS.study_folder(STORE, t.name, st.name)).is_done for t in all_tiers() for st in t.studies)
    assert len(report) == stored > 0 and len(site) >= declared + 1
    bad = check_all(commands, tmp_path)
    distinct = len(dict.fromkeys(c for _, c in commands))
    print(
        f"{len(commands)} printed commands ({distinct} distinct): report Studies {len(report)}, site {len(site)}, "
        f"stored study pages {len(pages)}; {len(bad)} would not run"
    )
    assert bad == {}, _explain(bad, commands)


@pytest.mark.parametrize("path", COMMITTED_REPORTS, ids=lambda p: str(p.relative_to(PROJECT_ROOT)))
def test_every_command_the_committed_reports_print_runs(path, tmp_path):
    """Every command of the committed report as written (its prose's fixed commands, its Studies section)."""
    if not path.is_file():
        pytest.skip(f"{path} is not committed")
    commands = markdown_commands(path)
    assert commands, f"{path} prints no command"
    bad = check_all(commands, tmp_path)
    assert bad == {}, _explain(bad, commands)
