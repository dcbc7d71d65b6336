"""Diagnostics as a user meets them (issue 13), a test per class.

Issue 13 tried serq-ref as a new user would and found the first errors a
newcomer meets often misleading, one error hiding the others, some inputs
hanging. Each section below is one class of the issue; the bad inputs are
given with their exact messages and locations.
"""

from __future__ import annotations

import json
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
# One error must not hide another
# --------------------------------------------------------------------------


def test_check_and_ir_link_a_program_without_a_run_block(capsys, tmp_path):
    """"check and ir link a program whether or not it has a run block (check on a library checks its
    definitions)"."""
    path = write(tmp_path, SMALL)
    code, out, err = run_cli(capsys, "check", path)
    assert (code, out, err) == (0, "OK: 0 pool(s), 1 stage(s), 9 attribute(s), 3 block(s)\n", "")
    code, out, _ = run_cli(capsys, "ir", path)
    assert code == 0 and json.loads(out)["horizon"] == "inf"
    code, out, err = run_cli(capsys, "check", str(ROOT / "examples/lib/vllm.sq"))
    assert code == 0 and out.startswith("OK: 2 pool(s), 1 stage(s)"), err


def test_no_horizon_is_said_only_by_a_command_that_runs_and_only_without_one(capsys, tmp_path):
    path = write(tmp_path, SMALL)
    code, out, err = run_cli(capsys, "run", path)
    assert code == 1 and out == ""
    assert err == f"{path}: error: no horizon: write `run {{ horizon T; }}` in the program, or give --horizon T\n"
    code, _, err = run_cli(capsys, "trace", path)
    assert code == 1 and "no horizon" in err
    code, out, err = run_cli(capsys, "run", path, "--horizon", "100")
    assert code == 0 and out.startswith("run: horizon 100 end 100"), err
    code, out, _ = run_cli(capsys, "trace", path, "--horizon", "5", "--steps", "3")
    assert code == 0 and len(out.splitlines()) == 3


def test_the_command_line_supplies_or_overrides_every_run_setting(capsys, tmp_path):
    path = write(tmp_path, SMALL + "run { horizon 10; seed 3; }\n")
    code, out, err = run_cli(capsys, "ir", path, "--horizon", "100", "--warmup", "5", "--seed", "7",
                             "--arrivals", "4")
    assert code == 0, err
    ir = json.loads(out)
    assert (ir["horizon"], ir["warmup"], ir["seed"], ir["arrivals"]) == (100.0, 5.0, 7, 4)
    code, out, err = run_cli(capsys, "check", path, "--horizon", "20")
    assert code == 0, err


def test_every_front_end_error_is_reported_in_source_order(capsys, tmp_path):
    path = write(tmp_path, """\
stage srv : fifo;
workload { arrive poisson(0.5); }
session {
  set a = unknown1;
  run srv (~exp(1));
  set b = nope + 1;
  run srvx (1);
}
""")
    code, out, err = run_cli(capsys, "check", path)
    assert code == 1 and out == ""
    assert err == (
        f"{path}:4:11: error: unknown name `unknown1`: not a let constant, a session attribute (set or choose "
        "assigns one) or a context variable\n"
        "    set a = unknown1;\n"
        "            ^^^^^^^^\n"
        f"{path}:6:11: error: unknown name `nope`: not a let constant, a session attribute (set or choose assigns "
        "one) or a context variable\n"
        "    set b = nope + 1;\n"
        "            ^^^^\n"
        f"{path}:7:7: error: unknown stage `srvx` (did you mean `srv`?)\n"
        "    run srvx (1);\n"
        "        ^^^^\n"
        "3 errors\n")


def test_every_declaration_error_is_reported(capsys, tmp_path):
    path = write(tmp_path, "let a = 1;\nlet a = 2;\nstage s : fifo;\nstage s : delay;\nsession { run s (1); }\n")
    code, _, err = run_cli(capsys, "check", path)
    assert code == 1
    assert f"{path}:2:5: error: let `a` is declared twice" in err
    assert f"{path}:4:7: error: stage `s` is declared twice" in err
    assert err.endswith("2 errors\n")


def test_every_link_error_is_reported_in_source_order(capsys, tmp_path):
    """Link errors of several checks (a context variable out of its place, a constant guard that is a
    probability, a run on a step stage without a mode) and a missing horizon, all in one report."""
    path = write(tmp_path, """\
stage eng : step { budget 8; cost 1; }
stage srv : fifo;
workload { arrive poisson(0.5); }
session {
  branch (0.5) { run srv (1); }
  run eng (4);
  set x = tokens;
}
""")
    code, _, err = run_cli(capsys, "run", path)
    assert code == 1
    located = [line.split(": error: ")[0] for line in err.splitlines() if ": error: " in line]
    assert located == [path, f"{path}:5:3", f"{path}:6:3", f"{path}:7:3"], err
    assert "no horizon" in err and "is not a test" in err and "needs a mode" in err and "`tokens` is read" in err
    assert err.endswith("4 errors\n")


def test_an_ir_file_gets_every_error_too(capsys, tmp_path):
    path = write(tmp_path, SMALL + "run { horizon 10; }\n")
    code, out, _ = run_cli(capsys, "ir", path)
    ir = json.loads(out)
    ir["pools"] = []
    ir["stages"][0]["kind"] = {"Fifo": 0}
    ir["warmup"] = -1.0
    bad = write(tmp_path, json.dumps(ir), "prog.ir.json")
    code, _, err = run_cli(capsys, "check", bad)
    assert code == 1
    assert f"{bad}: error: warmup: the warm-up is -1" in err
    assert f"{bad}: error: stages[0] (srv): a fifo stage needs at least one server, not 0" in err
    assert err.endswith("2 errors\n")
