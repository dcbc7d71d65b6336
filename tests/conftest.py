"""Test-suite settings.

Hypothesis: under CI (the environment variable CI is set, as .ci/run's
runner does) the examples are derandomized, so that a CI run is repeatable and
a failure reproduces; locally Hypothesis explores afresh on every run.

The real vLLM scheduler: a test that drives it is marked ``vllm``. It runs
when SERQ_VLLM_PYTHON names the optional environment
(oracle/real/setup-vllm.sh); without it the test is deselected, not skipped.

Campaigns: a long statistical or differential test is marked ``campaign`` and
deselected by the default run (pyproject.toml's ``-m 'not campaign'``); it is
run by hand, and what it found is recorded as data (docs/data/, oracle/data/,
tests/digest/) that the default suite replays, and in docs/campaigns.md.

So that no test is left out silently, the run's summary says how many tests
were deselected of each kind, why, and how to run them (``summary_lines``):
the vLLM ones, the campaigns, and those the command line's own -k, -m or
--deselect left out. Under pytest-xdist (pyproject.toml's ``-n``) the workers
collect and deselect; each hands its deselections to the controller at its
end, which prints the summary and counts them in the closing line ("N passed,
M deselected in ...") as a run without workers does.

A local Ray cluster: a test that starts one (``ray start --head`` on
loopback) is marked ``ray``. It runs when SERQ_RAY=1 and Ray is installed
(the optional extra ``ray``); otherwise it is deselected and the summary says
so, like the ``vllm`` tests.
"""

import os

import pytest
from hypothesis import settings

settings.register_profile("ci", derandomize=True, print_blob=True)
if os.environ.get("CI"):
    settings.load_profile("ci")

#: The environment variable that names the vLLM environment's python (oracle.real.PYTHON_VARIABLE).
VLLM_VARIABLE = "SERQ_VLLM_PYTHON"
#: The environment variable that lets the tests start a local Ray head.
RAY_VARIABLE = "SERQ_RAY"
#: the kinds of deselected tests, in the order the summary names them
VLLM, RAY, CAMPAIGN, OTHER = "vllm", "ray", "campaign", "other"
#: the key of a worker's deselections in its workeroutput (pytest-xdist)
WORKER_OUTPUT = "serq_deselected"

#: every deselected test's node id: its kind, and whether it is a campaign too
_deselected: dict[str, tuple[str, bool]] = {}


def _record(items, kind=None) -> None:
    for item in items:
        campaign = item.get_closest_marker("campaign") is not None
        _deselected.setdefault(item.nodeid, (kind or (CAMPAIGN if campaign else OTHER), campaign))


def _ray_usable() -> bool:
    if os.environ.get(RAY_VARIABLE) != "1":
        return False
    import importlib.util

    return importlib.util.find_spec("ray") is not None


def _deselect(config, items, marker: str) -> None:
    dropped = [item for item in items if item.get_closest_marker(marker) is not None]
    if dropped:
        _record(dropped, marker)
        config.hook.pytest_deselected(items=dropped)
        items[:] = [item for item in items if item.get_closest_marker(marker) is None]


def pytest_collection_modifyitems(config, items):
    if not os.environ.get(VLLM_VARIABLE):
        _deselect(config, items, VLLM)
    if not _ray_usable():
        _deselect(config, items, RAY)


def pytest_deselected(items):
    """Every deselection (ours above, -m's, -k's, --deselect's), by kind."""
    _record(items)


def summary_lines(deselected: dict[str, tuple[str, bool]]) -> list[str]:
    """What the run's summary says of the deselected tests (node id: kind, campaign too), one line a kind."""
    kinds = [kind for kind, _ in deselected.values()]
    lines = []
    vllm = kinds.count(VLLM)
    if vllm:
        both = sum(1 for kind, campaign in deselected.values() if kind == VLLM and campaign)
        lines.append(
            f"{vllm} tests that drive the real vLLM scheduler were deselected"
            + (f" ({both} of them also marked campaign)" if both else "")
            + f": {VLLM_VARIABLE} is not set (an optional extra: bash oracle/real/setup-vllm.sh, then export "
            f"{VLLM_VARIABLE}=VENV/bin/python); what they answered is recorded in oracle/data/, which the "
            "default suite replays")
    ray = kinds.count(RAY)
    if ray:
        lines.append(
            f"{ray} tests that start a local Ray cluster were deselected: {RAY_VARIABLE}=1 is not set or ray is not "
            "installed (an optional extra: pip install -e '.[ray]', then export SERQ_RAY=1; the head takes about "
            "20 s and 1 GB to start)")
    campaigns = kinds.count(CAMPAIGN)
    if campaigns:
        lines.append(
            f"{campaigns} campaign tests were deselected (marked campaign: long statistical and differential "
            "runs, not in the default run's -m 'not campaign'): run them with python3 -m pytest -m campaign "
            "-o timeout=0 [FILE]; their results are recorded in docs/data/, oracle/data/ and tests/digest/, "
            "which the default suite replays, and in docs/campaigns.md")
    other = kinds.count(OTHER)
    if other:
        lines.append(f"{other} tests were deselected by the command line's -k, -m or --deselect")
    return lines


class Deselected:
    """A deselected test as the controller's terminal reporter counts it (it has only the node id)."""

    def __init__(self, nodeid: str):
        self.nodeid = nodeid


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):
    """(pytest-xdist, on the controller) a worker has finished: its deselections and rule counts join ours."""
    output = getattr(node, "workeroutput", {})
    for nodeid, (kind, campaign) in output.get(WORKER_OUTPUT, {}).items():
        _deselected.setdefault(nodeid, (kind, campaign))
    trace_contract.pytest_testnodedown(node, error)


@pytest.hookimpl(tryfirst=True)
def pytest_sessionfinish(session, exitstatus):
    config = session.config
    if hasattr(config, "workerinput"):
        config.workeroutput[WORKER_OUTPUT] = {nodeid: list(value) for nodeid, value in _deselected.items()}
    elif config.pluginmanager.has_plugin("dsession"):
        # the controller of pytest-xdist collected nothing itself: the workers' deselections are the run's
        reporter = config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            counted = reporter.stats.setdefault("deselected", [])
            if not counted:
                counted.extend(Deselected(nodeid) for nodeid in sorted(_deselected))
    trace_contract.pytest_sessionfinish(session, exitstatus)


def pytest_terminal_summary(terminalreporter):
    for line in summary_lines(_deselected):
        terminalreporter.write_line(line)


# the step trace's contract over the suite: every record checked against the trace schema, every rule
# counted, the rule coverage written at the end (tests/trace_contract.py)
import trace_contract  # noqa: E402
from trace_contract import pytest_runtest_logfinish, pytest_runtest_logstart  # noqa: E402,F401
