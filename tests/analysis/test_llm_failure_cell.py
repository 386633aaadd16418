"""Table 1 shows, per run, the share of LLM-using queries whose LLM call got no answer and the share whose
unparseable answer a fallback replaced (issue 15, case 2), from metrics.json's "llm" section."""

from analysis.formatting import NM, llm_failure_cell


def test_cells():
    assert llm_failure_cell({"llm": {"queries": 0}}) == "-"  # no LLM call: nothing to fail
    assert llm_failure_cell({}) == NM  # a run made before LLM failures were counted
    m = {"llm": {"queries": 120, "infra_failure_share": 0.025, "parse_fallback_share": 0.15, "degraded": True}}
    assert llm_failure_cell(m) == "2.5% / 15.0% (degraded)"
    m["llm"].update(parse_fallback_share=0.05, degraded=False)
    assert llm_failure_cell(m) == "2.5% / 5.0%"
