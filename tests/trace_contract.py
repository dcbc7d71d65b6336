"""The step trace's contract, held over the whole test suite (issue 12;
docs/step-trace.md, "Checked by the tests"; tests/conftest.py installs it).

- Every record any test's trace yields is checked against the trace schema
  (ir_schema/steptrace.schema.json, by its compiled checker): a record that
  does not match fails the test that traced it, where it was made.
- Every applied rule is counted, with the tests that applied it. At the end
  of the session the counts are written to ``build/rule-coverage.json`` (or
  the file the environment variable SERQ_REF_RULE_COVERAGE names), one
  deterministic JSON document: per rule, how often it applied and in how
  many tests, and the first such test by name; the rules no test applied.
- When the session ran the whole default suite (no -k, no paths but the
  test directory, the default marker expression) and passed, a registered
  rule no test applied fails it: every rule is exercised by at least one
  test. docs/data/rule_coverage.json is the report of such a run, and
  tests/test_trace_coverage.py holds it and docs/semantics.md's summary of it
  to the registry.
- Under pytest-xdist (pyproject.toml's ``-n``) every worker counts its own
  tests' traces and hands its counts over at its end (``worker_counts``);
  the controller adds them up (``add_worker_counts``) and writes the one
  report. A rule's first test is the least test name that applied it, so the
  set of rules applied, never and unregistered do not depend on the number
  of workers; the counts of records can, where a test module caches a trace
  another module also makes.

The wrapper replaces ``semantics.smallstep.driver.trace`` when this module is
imported, before any test module imports the name, so that every way a test
reaches the trace (the driver, the CLI, oracle/) is seen.
"""

from __future__ import annotations

import json
import os
import pathlib
from collections import Counter, defaultdict

from ir_schema.steptrace import checker
from semantics.smallstep import driver
from semantics.smallstep.rules import REGISTRY

ROOT = pathlib.Path(__file__).resolve().parent.parent
DEFAULT_REPORT = ROOT / "build" / "rule-coverage.json"
REPORT_FORMAT = "serq-ref/rule-coverage"

_original_trace = driver.trace
_check = checker()
_counts: Counter = Counter()
_tests: defaultdict = defaultdict(set)
_current = ["(outside a test)"]
_tracing_tests: set = set()


def checked_trace(*args, **kwargs):
    """driver.trace, every record checked against the schema and counted for the test that traced it."""
    test = _current[0]
    seen = set()
    for record in _original_trace(*args, **kwargs):
        _check(record)
        rule = record["rule"]
        _counts[rule] += 1
        if rule not in seen:
            seen.add(rule)
            _tests[rule].add(test)
            _tracing_tests.add(test)
        yield record


checked_trace.__doc__ = (_original_trace.__doc__ or "") + "\n\n(Under the tests: " + checked_trace.__doc__ + ")"
driver.trace = checked_trace


def report() -> dict:
    """The suite's rule coverage: every registered rule (by family, then name) with its counts."""
    names = sorted(REGISTRY, key=lambda n: tuple(n.split("/")))
    rules = {}
    for name in names:
        tests = sorted(_tests.get(name, ()))
        rules[name] = {"applied": _counts.get(name, 0), "tests": len(tests), "first_test": tests[0] if tests else None}
    return {"format": REPORT_FORMAT, "version": 1, "tests_tracing": len(_tracing_tests),
            "records": sum(_counts.values()), "rules": rules,
            "never": [name for name in names if not _counts.get(name)],
            "unregistered": sorted(set(_counts) - set(REGISTRY))}


def pytest_runtest_logstart(nodeid, location):
    _current[0] = nodeid


def pytest_runtest_logfinish(nodeid, location):
    _current[0] = "(outside a test)"


def _whole_suite(session) -> bool:
    config = session.config
    tests = ROOT / "tests"
    args = [pathlib.Path(a.split("::")[0]).resolve() for a in config.args]
    return (not config.option.keyword and config.option.markexpr == "not campaign"
            and all(a in (tests, ROOT) for a in args) and not getattr(config.option, "lf", False)
            and not config.option.deselect)


#: the key of a worker's counts in its workeroutput (pytest-xdist)
WORKER_OUTPUT = "serq_rule_coverage"


def worker_counts() -> dict:
    """This process's counts, as plain JSON values a pytest-xdist worker hands to the controller."""
    return {"counts": dict(_counts), "tests": {rule: sorted(tests) for rule, tests in _tests.items()},
            "tracing": sorted(_tracing_tests)}


def add_worker_counts(data: dict) -> None:
    """Add a worker's counts (``worker_counts``) to this process's."""
    _counts.update(data["counts"])
    for rule, tests in data["tests"].items():
        _tests[rule].update(tests)
    _tracing_tests.update(data["tracing"])


def pytest_testnodedown(node, error):
    """(pytest-xdist, on the controller) a worker has finished: its counts join the report."""
    data = getattr(node, "workeroutput", {}).get(WORKER_OUTPUT)
    if data is not None:
        add_worker_counts(data)


def pytest_sessionfinish(session, exitstatus):
    if hasattr(session.config, "workerinput"):  # a pytest-xdist worker: the controller writes the report
        session.config.workeroutput[WORKER_OUTPUT] = worker_counts()
        return
    data = report()
    path = pathlib.Path(os.environ.get("SERQ_REF_RULE_COVERAGE", DEFAULT_REPORT))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1) + "\n")
    if exitstatus == 0 and _whole_suite(session) and (data["never"] or data["unregistered"]):
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        message = (f"rule coverage: no test applied {data['never']}"
                   + (f"; applied but not registered: {data['unregistered']}" if data["unregistered"] else "")
                   + f" (report: {path})")
        if reporter is not None:
            reporter.write_line(message, red=True)
        session.exitstatus = 1


def summary_markdown(data: dict) -> str:
    """docs/semantics.md's table of the suite's rule coverage, made from a report (``report()``'s shape)."""
    lines = ["| rule | applied | tests | first test |", "|---|---:|---:|---|"]
    for name, row in data["rules"].items():
        first = f"`{row['first_test']}`" if row["first_test"] else "none"
        lines.append(f"| `{name}` | {row['applied']:,} | {row['tests']:,} | {first} |")
    return "\n".join(lines) + "\n"
