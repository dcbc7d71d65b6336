"""Test-suite settings.

Hypothesis: under CI (the environment variable CI is set, as .ci/run's
runner does) the examples are derandomized, so that a CI run is repeatable and
a failure reproduces; locally Hypothesis explores afresh on every run.
"""

import os

from hypothesis import settings

settings.register_profile("ci", derandomize=True, print_blob=True)
if os.environ.get("CI"):
    settings.load_profile("ci")

# the step trace's contract over the suite: every record checked against the trace schema, every rule
# counted, the rule coverage written at the end (tests/trace_contract.py)
from trace_contract import pytest_runtest_logfinish, pytest_runtest_logstart, pytest_sessionfinish  # noqa: E402,F401
