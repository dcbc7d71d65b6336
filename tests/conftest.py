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

A local Ray cluster: a test that starts one (``ray start --head`` on
loopback) is marked ``ray``. It runs when SERQ_RAY=1 and Ray is installed
(the optional extra ``ray``); otherwise it is deselected and the summary says
so, like the ``vllm`` tests.
"""

import os

from hypothesis import settings

settings.register_profile("ci", derandomize=True, print_blob=True)
if os.environ.get("CI"):
    settings.load_profile("ci")

#: The environment variable that names the vLLM environment's python (oracle.real.PYTHON_VARIABLE).
VLLM_VARIABLE = "SERQ_VLLM_PYTHON"
_without_vllm: list[str] = []


#: The environment variable that lets the tests start a local Ray head.
RAY_VARIABLE = "SERQ_RAY"
_without_ray: list[str] = []


def _ray_usable() -> bool:
    if os.environ.get(RAY_VARIABLE) != "1":
        return False
    import importlib.util

    return importlib.util.find_spec("ray") is not None


def _deselect(config, items, marker: str, into: list[str]) -> None:
    kept = [item for item in items if item.get_closest_marker(marker) is None]
    if len(kept) < len(items):
        into.extend(item.nodeid for item in items if item.get_closest_marker(marker) is not None)
        config.hook.pytest_deselected(items=[item for item in items if item.get_closest_marker(marker) is not None])
        items[:] = kept


def pytest_collection_modifyitems(config, items):
    if not os.environ.get(VLLM_VARIABLE):
        _deselect(config, items, "vllm", _without_vllm)
    if not _ray_usable():
        _deselect(config, items, "ray", _without_ray)


def pytest_terminal_summary(terminalreporter):
    if _without_vllm:
        terminalreporter.write_line(
            f"{len(_without_vllm)} tests that drive the real vLLM scheduler were deselected: {VLLM_VARIABLE} is not "
            "set (an optional extra: bash oracle/real/setup-vllm.sh, then export SERQ_VLLM_PYTHON=VENV/bin/python)")
    if _without_ray:
        terminalreporter.write_line(
            f"{len(_without_ray)} tests that start a local Ray cluster were deselected: {RAY_VARIABLE}=1 is not set "
            "or ray is not installed (an optional extra: pip install -e '.[ray]', then export SERQ_RAY=1; the head "
            "takes about 20 s and 1 GB to start)")


# the step trace's contract over the suite: every record checked against the trace schema, every rule
# counted, the rule coverage written at the end (tests/trace_contract.py)
from trace_contract import pytest_runtest_logfinish, pytest_runtest_logstart, pytest_sessionfinish  # noqa: E402,F401
