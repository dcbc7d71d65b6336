"""Test-suite settings.

Hypothesis: under CI (the environment variable CI is set, as .ci/run's
runner does) the examples are derandomized, so that a CI run is repeatable and
a failure reproduces; locally Hypothesis explores afresh on every run.

The real vLLM scheduler: a test that drives it is marked ``vllm``. It runs
when SERQ_VLLM_PYTHON names the optional environment
(oracle/real/setup-vllm.sh); without it the test is deselected, not skipped,
and the run's summary says how many and why, so that no test skips itself
silently. What the real scheduler answers is recorded data the other tests
replay.
"""

import os

from hypothesis import settings

settings.register_profile("ci", derandomize=True, print_blob=True)
if os.environ.get("CI"):
    settings.load_profile("ci")

#: The environment variable that names the vLLM environment's python (oracle.real.PYTHON_VARIABLE).
VLLM_VARIABLE = "SERQ_VLLM_PYTHON"
_without_vllm: list[str] = []


def pytest_collection_modifyitems(config, items):
    if os.environ.get(VLLM_VARIABLE):
        return
    kept = [item for item in items if item.get_closest_marker("vllm") is None]
    if len(kept) < len(items):
        _without_vllm.extend(item.nodeid for item in items if item.get_closest_marker("vllm") is not None)
        config.hook.pytest_deselected(items=[item for item in items if item.get_closest_marker("vllm") is not None])
        items[:] = kept


def pytest_terminal_summary(terminalreporter):
    if _without_vllm:
        terminalreporter.write_line(
            f"{len(_without_vllm)} tests that drive the real vLLM scheduler were deselected: {VLLM_VARIABLE} is not "
            "set (an optional extra: bash oracle/real/setup-vllm.sh, then export SERQ_VLLM_PYTHON=VENV/bin/python)")


# the step trace's contract over the suite: every record checked against the trace schema, every rule
# counted, the rule coverage written at the end (tests/trace_contract.py)
from trace_contract import pytest_runtest_logfinish, pytest_runtest_logstart, pytest_sessionfinish  # noqa: E402,F401
