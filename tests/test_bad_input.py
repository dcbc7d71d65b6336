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


# --------------------------------------------------------------------------
# No silent answer: a draw's argument outside its domain
# --------------------------------------------------------------------------

DRAWS = [  # (a statement with a constant argument, the same computed from x, which is 0 in the run; the message)
    ("branch with (1.5) { run srv (1); } else { end; }", "branch with (x + 1.5) { run srv (1); } else { end; }",
     "~bernoulli's probability is 1.5"),
    ("branch with (-0.5) { run srv (1); } else { end; }", "branch with (x - 0.5) { run srv (1); } else { end; }",
     "~bernoulli's probability is -0.5"),
    ("branch (~bernoulli(2)) { end; } else { end; }", "branch (~bernoulli(x + 2)) { end; } else { end; }",
     "~bernoulli's probability is 2"),
    ("run srv (~exp(-1));", "run srv (~exp(x - 1));", "~exp's mean is -1"),
    ("run srv (~uniform(5, 1));", "run srv (~uniform(x + 5, 1));", "~uniform's bounds are 5 and 1"),
    ("run srv (~uniform(0, inf));", "run srv (~uniform(0, x + inf));", "~uniform's upper bound is inf"),
    ("run srv (~erlang(0.5, 1));", "run srv (~erlang(x + 0.5, 1));", "~erlang's phase count k is 0.5"),
    ("run srv (~erlang(2, -3));", "run srv (~erlang(2, x - 3));", "~erlang's mean is -3"),
    ("run srv (~h2(1, 0.5));", "run srv (~h2(1, x + 0.5));", "~h2's squared coefficient of variation is 0.5"),
    ("run srv (~h2(-1, 2));", "run srv (~h2(x - 1, 2));", "~h2's mean is -1"),
]


@pytest.mark.parametrize("statement, _computed, message", DRAWS)
def test_a_constant_draw_argument_outside_its_domain_is_a_located_error(capsys, tmp_path, statement, _computed,
                                                                       message):
    # issue 23: branch with (1.5) and (-0.5) ran silently, always and never taken
    path = write(tmp_path, "stage srv : fifo;\nworkload { arrive poisson(0.5); }\n"
                           f"session {{\n  {statement}\n}}\nrun {{ horizon 5; }}\n")
    code, out, err = run_cli(capsys, "check", path)
    assert code == 1 and out == ""
    assert err.startswith(f"{path}:4:3: error: {message}"), err


@pytest.mark.parametrize("_statement, computed, message", DRAWS)
def test_a_computed_draw_argument_outside_its_domain_stops_the_run_naming_the_statement(capsys, tmp_path,
                                                                                      _statement, computed, message):
    path = write(tmp_path, "stage srv : fifo;\nworkload { arrive poisson(0.5); init { set x = 0; } }\n"
                           f"session {{\n  run srv (1);\n  {computed}\n}}\nrun {{ horizon 50; }}\n")
    code, out, err = run_cli(capsys, "check", path)
    assert code == 0, err
    code, out, err = run_cli(capsys, "run", path)
    assert code == 1 and out == ""
    assert err.startswith(f"{path}:5:3: error: {message}") and "(at time " in err, err


def test_draws_inside_their_domains_are_no_error(capsys, tmp_path):
    path = write(tmp_path, "stage srv : fifo;\nworkload { arrive poisson(0.5); }\nsession {\n"
                           "  branch with (0) { end; } else { run srv (~uniform(1, 1)); }\n"
                           "  branch with (1) { run srv (~erlang(3, 0) + ~h2(0, 1) + ~exp(0) + ~det(-1)); } "
                           "else { end; }\n}\nrun { horizon 50; }\n")
    code, out, err = run_cli(capsys, "run", path)
    assert code == 0 and err == "", err
