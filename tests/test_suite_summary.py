"""The run's summary explains every deselected test (issue 23): the vLLM ones,
the campaigns and the command line's own, each counted once with how to run
it (tests/conftest.py); and under pytest-xdist the controller hears every
worker's deselections and rule counts (tests/conftest.py, tests/trace_contract.py).
"""

from __future__ import annotations

import pathlib
import tomllib
from types import SimpleNamespace

import conftest
import trace_contract

ROOT = pathlib.Path(__file__).resolve().parent.parent


def test_every_kind_of_deselection_is_counted_and_explained() -> None:
    deselected = {"a::vllm": (conftest.VLLM, False), "b::vllm_campaign": (conftest.VLLM, True),
                  "c::campaign": (conftest.CAMPAIGN, True), "d::campaign": (conftest.CAMPAIGN, True),
                  "e::campaign": (conftest.CAMPAIGN, True), "f::k": (conftest.OTHER, False)}
    vllm, campaigns, other = conftest.summary_lines(deselected)
    assert vllm.startswith("2 tests that drive the real vLLM scheduler were deselected (1 of them also marked "
                           "campaign): SERQ_VLLM_PYTHON is not set")
    assert campaigns.startswith("3 campaign tests were deselected") and "-m campaign" in campaigns
    assert "docs/campaigns.md" in campaigns
    assert other == "1 tests were deselected by the command line's -k, -m or --deselect"
    assert conftest.summary_lines({"c::campaign": (conftest.CAMPAIGN, True)})[0].startswith("1 campaign tests")
    assert conftest.summary_lines({}) == []


def test_a_workers_deselections_and_rule_counts_reach_the_controller(monkeypatch) -> None:
    monkeypatch.setattr(conftest, "_deselected", {"x::one": (conftest.CAMPAIGN, True)})
    monkeypatch.setattr(trace_contract, "_counts", trace_contract.Counter({"session/set": 2}))
    monkeypatch.setattr(trace_contract, "_tests", trace_contract.defaultdict(set, {"session/set": {"t::b"}}))
    monkeypatch.setattr(trace_contract, "_tracing_tests", {"t::b"})
    worker = {"counts": {"session/set": 3, "session/end": 1},
              "tests": {"session/set": ["t::a"], "session/end": ["t::a"]}, "tracing": ["t::a"]}
    node = SimpleNamespace(workeroutput={conftest.WORKER_OUTPUT: {"x::two": ["vllm", False]},
                                         trace_contract.WORKER_OUTPUT: worker})
    conftest.pytest_testnodedown(node, None)
    assert conftest._deselected == {"x::one": (conftest.CAMPAIGN, True), "x::two": (conftest.VLLM, False)}
    rules = trace_contract.report()["rules"]
    assert rules["session/set"] == {"applied": 5, "tests": 2, "first_test": "t::a"}
    assert rules["session/end"] == {"applied": 1, "tests": 1, "first_test": "t::a"}
    assert trace_contract.report()["tests_tracing"] == 2


def test_the_default_run_uses_every_core_and_leaves_the_campaigns_out() -> None:
    """pyproject.toml's addopts: the campaigns deselected, pytest-xdist on every core, a file per worker;
    and the test extra installs pytest-xdist."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    addopts = project["tool"]["pytest"]["ini_options"]["addopts"]
    assert "-m 'not campaign'" in addopts and "-n auto" in addopts and "--dist loadfile" in addopts
    assert any(d.startswith("pytest-xdist") for d in project["project"]["optional-dependencies"]["test"])
