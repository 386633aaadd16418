"""The fault and bad-input attack as tests (issue 36, item 9): every case the attack on 6c27475 found, and the cases
of the round before it that now pass, named here with the test that holds it. A renamed or deleted test fails
:func:`test_every_case_has_its_test`; the one case no other module covers (a command-line ``_target_``) is here."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from experiments.config import load_config
from experiments.runner import run_experiment
from lethe.core.paths import PROJECT_ROOT
from tests.conftest import overrides_for

CASES = {
    # the fourth round (issue 58)
    "[x](javascript:alert(1)) in any Markdown the site renders becomes a live link": "tests/reliability/test_safe_links.py::test_an_unsafe_scheme_renders_as_text",
    "qrels.trec symlinked to a secret in a finished run is skipped as done and uploaded": "tests/reliability/test_damaged_runs.py::test_a_damaged_folder_is_listed_left_out_and_made_again",
    "+embedder.hf_key=... and a URL with ?access_token=... reach the manifest and Hydra's records": "tests/reliability/test_secrets_by_shape.py::test_config_trees_and_overrides_are_checked_by_shape",
    "a bring-your-own describe() with an api_key and a user:pw URL reaches the manifest": "tests/reliability/test_secrets_by_shape.py::test_a_bring_your_own_describe_reaches_the_manifest_redacted",
    "nan scores in a run file or from a callable are kept and ranked arbitrarily": "tests/reliability/test_byo_inputs.py::test_a_nan_score_is_refused_with_its_query_and_doc_named",
    "a run file of unknown doc ids, unknown query ids, or an empty file makes a DONE run scoring 0": "tests/reliability/test_byo_inputs.py::test_a_ranking_of_nothing_this_run_knows_stops_before_any_search",
    "ad-hoc qrels grade 0.7 becomes 0 by int()": "tests/reliability/test_byo_inputs.py::test_a_fractional_or_non_numeric_grade_is_refused",
    "an ad-hoc dataset named ../../... or <script> writes files before the name is refused": "tests/reliability/test_byo_inputs.py::test_an_adhoc_dataset_name_is_checked_before_anything_is_written",
    "a callable returning a string or None fails without the system's name": "tests/reliability/test_byo_inputs.py::test_a_callable_returning_the_wrong_type_is_named",
    "+embedder.evil._target_=pandas.read_pickle (joblib.load, builtins.open, numpy.load) runs from a config": "tests/reliability/test_target_allowlist.py::test_a_target_outside_the_project_is_refused_before_the_run",
    "the Python API's overrides instantiate any callable": "tests/reliability/test_target_allowlist.py::test_the_python_api_refuses_it_too",
    "+hydra.callbacks.evil._target_=pandas.read_pickle runs at start-up": "tests/reliability/test_target_allowlist.py::test_a_hydra_callback_target_is_refused_at_the_command_line",
    "the embedder section accepts unknown keys": "tests/reliability/test_target_allowlist.py::test_the_embedder_section_refuses_unknown_keys",
    "a planted learned-fusion model.pkl is unpickled when iteration 3 binds": "tests/reliability/test_no_pickle_from_cache.py::test_a_planted_pickle_is_never_unpickled",
    "an embedding shard rewritten with random unit vectors of the right shape is used silently": "tests/reliability/test_cache_checksums.py::test_a_vector_run_over_a_rewritten_cache_scores_as_before",
    "the cached ONNX model is reused without a check": "tests/reliability/test_cache_checksums.py::test_a_cached_onnx_export_that_was_edited_is_exported_again",
    "a cached cross-encoder model set is loaded without a check": "tests/experiments/test_model_set_checksums.py::test_an_edited_model_set_is_quarantined_never_loaded",
    "ndcg@10 = 1.0 set in a stored per-query table reaches every table with OK": "tests/experiments/test_reproduce_reports.py::test_a_report_from_a_damaged_store_names_each_damaged_run",
    "an edited stored metrics.json mean shows on the site with a green OK": "tests/experiments/test_reproduce_reports.py::test_a_report_from_a_damaged_store_names_each_damaged_run",
    "a deleted stored metrics.json crashes the report (FileNotFoundError, exit 2)": "tests/experiments/test_reproduce_reports.py::test_a_report_from_a_damaged_store_names_each_damaged_run",
    "a truncated stored per_query.parquet crashes the site (ArrowInvalid), the old site left": "tests/experiments/test_reproduce_reports.py::test_a_report_from_a_damaged_store_names_each_damaged_run",
    "the committed store's files can be edited unseen": "tests/reliability/test_sealed_store.py::test_the_committed_store_matches_its_seals",
    "kill -9 during make report leaves tables and a card rewritten, report.md and figures not": "tests/experiments/test_reproduce_reports.py::test_a_killed_or_failed_report_leaves_the_previous_one_byte_identical",
    # the third round (issue 36)
    "a credential in an override, a config file, the environment or a URL reaches no file and no console line": "tests/reliability/test_secret_routes.py::test_a_planted_credential_is_refused_before_anything_is_written",
    "the Python API and the LLM backend refuse credentials": "tests/reliability/test_secret_routes.py::test_the_python_api_and_the_backend_refuse_credentials_too",
    "build_data dataset.name=../../escaped writes outside data.processed": "tests/experiments/test_build_data.py::test_a_dataset_name_that_is_a_path_is_refused_before_anything_is_written",
    "evidence as a string, a question as an object, a turn text as a list are read silently": "tests/reliability/test_bad_inputs.py::test_a_field_of_the_wrong_type_is_refused_naming_file_record_and_field",
    "a duplicated JSON key keeps the last value silently": "tests/reliability/test_bad_inputs.py::test_a_repeated_json_key_is_refused",
    "all evidence dangling, qa: [] and a lone surrogate crash with KeyError / UnicodeEncodeError": "tests/reliability/test_bad_inputs.py::test_degenerate_data_is_refused_with_a_sentence_not_a_key_error",
    "a malformed override names neither itself nor its key": "tests/reliability/test_bad_inputs.py::test_a_malformed_override_names_itself_and_its_key",
    "a full disk says No space left on device without a path": "tests/reliability/test_bad_inputs.py::test_a_full_disk_names_the_path",
    "a folder with DONE but no metrics.json or manifest.json crashes verification and the summary; a reversed "
    "run.trec verifies OK": "tests/reliability/test_damaged_runs.py::test_a_damaged_folder_is_listed_left_out_and_made_again",
    "kill -9 of reproduce leaves its model workers training as orphans": "tests/reliability/test_no_orphaned_work.py::test_workers_end_when_their_parent_is_killed",
    "a resumed reproduction trains the same models again beside the orphans": "tests/reliability/test_no_orphaned_work.py::test_two_builds_of_one_set_make_it_once",
    "a call to a server that never answers waits forever": "tests/reliability/test_bounded_exits.py::test_a_call_without_a_deadline_ends_at_the_read_timeout",
    "a stream that stalls waits forever": "tests/reliability/test_bounded_exits.py::test_a_stream_that_stalls_after_its_first_token_ends_at_the_read_timeout",
    "a run against a silent server pays every query's timeout before RunFailed": "tests/reliability/test_bounded_exits.py::test_a_run_stops_at_the_query_that_makes_its_failure_certain",
    "a stopped run blocked in an LLM call does not end": "tests/reliability/test_bounded_exits.py::test_sigterm_ends_a_run_blocked_in_a_call_without_any_limit",
    "the local submitit launcher races on a loaded machine (%j in its folder)": "tests/experiments/test_launchers.py::test_the_local_launcher_folder_exists_before_any_job_starts",
    "an embedding shard of NaN vectors, of the wrong size, or a folder in its place is used or crashes every run": "tests/lethe/core/test_cache.py::test_a_damaged_shard_is_quarantined_and_recomputed",
    "ONNX Runtime and other libraries write under $HOME": "tests/reliability/test_nothing_in_home.py::test_a_run_writes_nothing_under_home",
    "reproduce action=report crashes for a LoCoMo-format file run under its own dataset.name": "tests/reliability/test_own_data_report.py::test_a_locomo_format_file_under_its_own_name_is_run_and_reported",
    # the round before (issue 15 and its follow-up), passing since
    "a stale custom dataset folder is reused after its content changed": "tests/experiments/test_datasets.py::test_custom_folder_key_follows_its_content",
    "LLM failures (closed port, no answer in time) are filed as the method's numbers": "tests/experiments/test_llm_failures.py::test_a_closed_port_fails_the_run_without_done",
    "bad run values (run.k=0, ...) compute before failing": "tests/experiments/test_run_validation.py::test_bad_values_are_refused_before_any_compute",
    "a read-only results folder fails after the compute": "tests/experiments/test_run_validation.py::test_an_unwritable_results_folder_fails_before_the_compute",
    "two writers of one results folder race (the folder swap)": "tests/lethe/core/test_atomic.py::test_two_processes_rewriting_one_folder",
    "identical and different jobs started at once": "tests/experiments/test_concurrency.py::test_identical_and_different_jobs_at_once",
    "written files ignore the umask (permissions)": "tests/lethe/core/test_atomic.py::test_modes_follow_the_umask",
    "kill -9 at five points of a reproduction, then a resume, differs from a clean run": "tests/experiments/test_faults.py::test_kill_nine_at_six_points_then_rerun_equals_a_clean_run",
    "kill -9 during the model prerequisites leaves workers training as orphans; the resume trains them again": "tests/experiments/test_faults.py::test_kill_nine_at_six_points_then_rerun_equals_a_clean_run",
    "a command-line _target_ runs os.system": "tests/reliability/test_attack_cases.py::test_a_command_line_target_cannot_run_a_shell_command",
}


def _defined(path: Path) -> set[str]:
    return {n.name for n in ast.walk(ast.parse(path.read_text())) if isinstance(n, ast.FunctionDef)}


def test_every_case_has_its_test():
    missing = []
    for case, node in CASES.items():
        file, name = node.split("::")
        path = PROJECT_ROOT / file
        if not path.is_file() or name not in _defined(path):
            missing.append(f"{case}: {node}")
    assert not missing, "cases whose test is gone:\n" + "\n".join(missing)


def test_a_command_line_target_cannot_run_a_shell_command(tmp_path, work):
    marker = tmp_path / "ran"
    cfg = load_config(
        overrides_for(
            work,
            "dataset=locomo",
            "dataset.scopes=[conv-26]",
            "~method",
            "+method.name=x",
            "+method._target_=os.system",
            f"+method.command=touch {marker}",
            f"results_dir={tmp_path / 'results'}",
        )
    )
    with pytest.raises(Exception, match="outside the project.s packages"):  # refused before Hydra sees it
        run_experiment(cfg)
    assert not marker.exists() and not list((tmp_path / "results").rglob("DONE"))
