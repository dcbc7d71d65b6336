"""Bad input, third round (issue 23), a test per class.

A new user's bad inputs that crashed, answered silently, were blamed on the
wrong place or hid one another. Each section is one class of the issue; the
usage classes (--set, a number beyond a float's range, each command's usage
line) are in tests/test_cli.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from semantics.cli import main

ROOT = Path(__file__).resolve().parents[1]

SMALL = """\
stage srv : fifo;
workload { arrive poisson(0.5); }
session { run srv (~exp(1)); }
"""


def run_cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def write(tmp_path: Path, text: str, name: str = "prog.sq") -> str:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return str(path)


# --------------------------------------------------------------------------
# Every error where it is
# --------------------------------------------------------------------------


@pytest.mark.parametrize("setting, message, col", [
    ("horizon -5;", "the horizon is -5: a run's horizon is a positive time", 7),
    ("horizon 0;", "the horizon is 0: a run's horizon is a positive time", 7),
    ("horizon 5; warmup -1;", "the warm-up is -1: it is the time the statistics start", 18),
])
def test_a_run_setting_out_of_its_range_is_an_error_at_that_setting(capsys, tmp_path, setting, message, col):
    # issue 23: a negative horizon said "the warm-up (0) ends at or after the horizon (-5)", at the run block
    path = write(tmp_path, SMALL + f"run {{ {setting} }}\n")
    for command in ("check", "run"):
        code, out, err = run_cli(capsys, command, path)
        assert code == 1 and out == ""
        assert err.startswith(f"{path}:4:{col}: error: {message}"), err
        assert "ends at or after" not in err and err.count("error:") == 1
