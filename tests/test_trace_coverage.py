"""Rule coverage (issue 12): every rule of the semantics is applied by at
least one test.

tests/trace_contract.py counts, over a whole run of the suite, the rules
every test's trace applied, writes the report, and fails a run of the whole
default suite in which a registered rule was never applied.
docs/data/rule_coverage.json is the report of such a run (`CI=1
SERQ_REF_RULE_COVERAGE=docs/data/rule_coverage.json python3 -m pytest`),
summarised in docs/semantics.md (Rule coverage); these tests hold the two to
the registry and to each other.
"""

from __future__ import annotations

import json
import pathlib

from semantics.smallstep.driver import all_rules
from semantics.smallstep.rules import REGISTRY
import trace_contract

ROOT = pathlib.Path(__file__).resolve().parent.parent
RECORDED = ROOT / "docs" / "data" / "rule_coverage.json"


def recorded() -> dict:
    return json.loads(RECORDED.read_text())


def test_the_recorded_suite_applied_every_registered_rule():
    data = recorded()
    assert data["format"] == trace_contract.REPORT_FORMAT and data["version"] == 1
    assert list(data["rules"]) == [r.name for r in all_rules()], "the report names every registered rule, in order"
    assert data["never"] == [] and data["unregistered"] == []
    for name, row in data["rules"].items():
        assert row["applied"] >= 1 and row["tests"] >= 1 and row["first_test"], name
    assert data["records"] == sum(row["applied"] for row in data["rules"].values())


def test_docs_semantics_summarises_the_recorded_coverage():
    text = (ROOT / "docs" / "semantics.md").read_text()
    section = text[text.index("## Rule coverage"):]
    section = section[:section.index("\n## ", 3)] if "\n## " in section[3:] else section
    assert trace_contract.summary_markdown(recorded()) in section, \
        "docs/semantics.md's coverage table is not docs/data/rule_coverage.json's (tests/trace_contract.summary_markdown)"


def test_the_report_of_this_session_has_every_rule():
    """The live report's shape (its counts depend on which tests ran before this one)."""
    data = trace_contract.report()
    assert set(data["rules"]) == set(REGISTRY)
    assert set(data["never"]) == {name for name, row in data["rules"].items() if row["applied"] == 0}
