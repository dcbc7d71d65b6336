"""The README's two commands (the brief: one runs the main job, one passes
the tests, and `.ci/run` calls exactly the README's test command)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def two_commands() -> list[str]:
    section = (ROOT / "README.md").read_text().split("## Two commands", 1)[1].split("\n## ", 1)[0]
    return [line.strip() for line in section.splitlines() if line.startswith("    ")]


def test_the_readme_has_two_commands_each_installing_first() -> None:
    main, tests = two_commands()
    assert main.startswith("python3 -m pip install -e . && serq-ref run examples/")
    assert tests == "python3 -m pip install -e '.[test]' && python3 -m pytest -q"
    assert (ROOT / re.search(r"serq-ref run (\S+)", main)[1]).is_file()


def test_ci_runs_exactly_the_readmes_test_command() -> None:
    lines = [line for line in (ROOT / ".ci" / "run").read_text().splitlines()
             if line.strip() and not line.startswith("#")]
    assert lines[-1] == two_commands()[1]
    assert lines[:-1] == ["set -euo pipefail", 'cd "$(dirname "$0")/.."']
