"""The command line: exit codes, usage errors, and the IR commands on IR files.

Brief: "Every bad input gets a clear error: FILE:LINE:COL: error: message, the
source line and a caret; exit 1 for a bad program, 2 for bad usage; never a
Python traceback."
"""

from __future__ import annotations

import glob
import json
import os
import subprocess
import sys

import pytest

from semantics.cli import main
from shared_paths import SHARED

ORACLE = str(SHARED / "oracle")
ORACLE_IR = sorted(glob.glob(os.path.join(ORACLE, "**", "*.ir.json"), recursive=True))


def run_cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_oracle_files_are_present():
    # the differential data this suite replays must be where the brief says
    assert len(ORACLE_IR) == 12


@pytest.mark.parametrize("argv", [[], ["run"], ["frobnicate", "x.sq"], ["run", "x.sq", "--seed", "minus"],
                                  ["run", "x.sq", "--set", "novalue"], ["run", "x.sq", "--horizon", "nan"],
                                  ["run", "x.sq", "--arrivals", "-3"]])
def test_bad_usage_exits_2_with_a_usage_line(capsys, argv):
    code, out, err = run_cli(capsys, *argv)
    assert code == 2
    assert "usage:" in err
    assert "Traceback" not in err and out == ""


def test_missing_file_is_usage(capsys):
    code, _, err = run_cli(capsys, "check", "does/not/exist.sq")
    assert code == 2 and "no such file: does/not/exist.sq" in err


def test_unknown_extension_is_usage(capsys, tmp_path):
    f = tmp_path / "prog.txt"
    f.write_text("x")
    code, _, err = run_cli(capsys, "check", str(f))
    assert code == 2 and "expected a .sq program or a .json IR file" in err


def test_set_on_an_ir_file_is_usage(capsys):
    code, _, err = run_cli(capsys, "ir", ORACLE_IR[0], "--set", "x=1")
    assert code == 2 and "--set applies to .sq programs" in err


def test_bad_json_is_a_program_error_naming_the_file(capsys, tmp_path):
    f = tmp_path / "broken.json"
    f.write_text('{"version": 13,')
    code, _, err = run_cli(capsys, "check", str(f))
    assert code == 1
    # located (issue 23, badin4): FILE:LINE:COL, the line and a caret where the JSON stops being JSON
    assert err.startswith(f"{f}:1:16: error: not JSON: Expecting property name")
    assert err.splitlines()[1:] == ['  {"version": 13,', "                 ^"]


@pytest.mark.parametrize("change, where, message", [
    (lambda d: d.pop("attrs"), (1, 1), "IR does not match the schema at $: 'attrs' is a required property"),
    (lambda d: d["stages"][0].update(kind=5), None, "IR does not match the schema at $.stages[0].kind: expected a "
                                                    "stage kind, found 5"),
    (lambda d: d.update(version=12), None, "the IR file is IR version 12"),
])
def test_an_ir_files_error_is_located_in_it(capsys, tmp_path, change, where, message):
    # issue 23, badin4: an IR file's schema and version errors named the JSON path alone, without a line
    d = json.load(open(ORACLE_IR[0]))
    change(d)
    text = json.dumps(d, indent=1)
    f = tmp_path / "bad.json"
    f.write_text(text)
    code, _, err = run_cli(capsys, "check", str(f))
    assert code == 1 and err.count("error:") == 1, err
    first, source, caret = err.splitlines()[:3]
    line, col = (int(n) for n in first[len(str(f)) + 1:].split(": error: ")[0].split(":"))
    if where is not None:
        assert (line, col) == where
    assert first.endswith(message) or message in first, err
    assert source == "  " + text.splitlines()[line - 1] and caret == " " * (col + 1) + "^", err
    value = text.splitlines()[line - 1][col - 1:]
    assert where is not None or value.startswith(("5", "12")), value  # the caret at the value itself


def test_other_ir_version_names_both_versions(capsys, tmp_path):
    d = json.load(open(ORACLE_IR[0]))
    d["version"] = 14
    f = tmp_path / "v14.json"
    f.write_text(json.dumps(d))
    code, _, err = run_cli(capsys, "check", str(f))
    assert code == 1 and "the IR file is IR version 14; serq-ref reads IR version 13" in err


def test_later_node_is_rejected_clearly(capsys, tmp_path):
    # FORMAT.md: later versions' nodes are rejected "with a clear message rather than a crash"
    d = json.load(open(ORACLE_IR[0]))
    d["blocks"][0].append({"Fork": [1, 2]})
    f = tmp_path / "fork.json"
    f.write_text(json.dumps(d))
    code, _, err = run_cli(capsys, "check", str(f))
    assert code == 1 and "error" in err and "Traceback" not in err


@pytest.mark.parametrize("path", ORACLE_IR, ids=lambda p: os.path.relpath(p, ORACLE))
def test_ir_reprints_oracle_files_exactly(capsys, path):
    # Issue 2: "loading an IR file and writing it gives the same JSON"
    code, out, err = run_cli(capsys, "ir", path)
    assert code == 0, err
    assert out == open(path).read()


@pytest.mark.parametrize("path", ORACLE_IR, ids=lambda p: os.path.relpath(p, ORACLE))
def test_check_summarises_oracle_files(capsys, path):
    d = json.load(open(path))
    code, out, err = run_cli(capsys, "check", path)
    assert code == 0, err
    assert out == (f"OK: {len(d['pools'])} pool(s), {len(d['stages'])} stage(s), "
                   f"{len(d['attrs'])} attribute(s), {len(d['blocks'])} block(s)\n")


def test_console_entry_point_module_form():
    # `python -m semantics` is the console script (issue 2, Skeleton)
    proc = subprocess.run([sys.executable, "-m", "semantics", "--version"], capture_output=True, text=True)
    assert proc.returncode == 0 and proc.stdout.startswith("serq-ref ")


# --------------------------------------------------------------------------
# End to end: run, trace, dump, determinism (issue 3, the CLI paragraph)
# --------------------------------------------------------------------------

EXAMPLES = os.path.join(os.path.dirname(__file__), "..", "examples")
LEASE = os.path.join(EXAMPLES, "pools", "lease.sq")
MM1 = os.path.join(EXAMPLES, "single-turn", "mm1.sq")


def test_run_text_report_first_line(capsys):
    code, out, err = run_cli(capsys, "run", MM1, "--horizon", "200", "--warmup", "10", "--seed", "3")
    assert code == 0, err
    first = out.splitlines()[0]
    assert first.startswith("run: horizon 200 end 200 warmup 10 seed 3 | whole run: events ")
    for word in ("arrivals", "ended", "turns", "mean live"):
        assert f" {word} " in first


def test_run_json_fields(capsys):
    code, out, err = run_cli(capsys, "run", MM1, "--horizon", "200", "--warmup", "10", "--json")
    assert code == 0, err
    report = json.loads(out)
    assert list(report)[:10] == ["serq_version", "horizon", "end", "warmup", "seed", "events", "arrivals", "ended",
                                 "turns", "mean_live"]
    assert set(report["observes"]) == {"sojourn", "wait", "slow"}
    assert set(report["observes"]["sojourn"]) == {"count", "mean", "ci", "cv2", "p99", "not_finite"}
    assert report["stages"][0]["name"] == "server"


def test_a_warmup_past_the_horizon_measures_nothing_and_is_an_error(capsys, tmp_path):
    """Seed 002 §3 Statistics: time averages over [warmup, end]; an empty
    interval is the flags' fault (usage, exit 2) or the program's (exit 1, at its run block)."""
    code, _, err = run_cli(capsys, "run", MM1, "--horizon", "200")  # mm1.sq warms up for 1000
    assert code == 2 and "the warm-up (1000) ends at or after the horizon (200)" in err
    program = tmp_path / "w.sq"
    program.write_text("stage s : fifo;\nworkload { arrive poisson(1); }\nsession { run s (1); }\n"
                       "run { horizon 10; warmup 10; }\n")
    code, _, err = run_cli(capsys, "check", str(program))
    assert code == 1 and err.startswith(f"{program}:4:1: error: the warm-up (10) ends at or after the horizon (10)")


def test_same_seed_same_bytes(capsys):
    # brief: "Same program, same seed: the same result, byte for byte."
    outs = [run_cli(capsys, "run", MM1, "--horizon", "300", "--warmup", "10", "--seed", "11")[1] for _ in range(2)]
    assert outs[0] == outs[1]
    other = run_cli(capsys, "run", MM1, "--horizon", "300", "--warmup", "10", "--seed", "12")[1]
    assert other != outs[0]


def test_same_seed_same_bytes_across_processes():
    # no dependence on Python's salted hash(): two processes, different PYTHONHASHSEED
    outs = []
    for salt in ("1", "2"):
        env = dict(os.environ, PYTHONHASHSEED=salt)
        proc = subprocess.run([sys.executable, "-m", "semantics", "run", MM1, "--horizon", "300", "--warmup", "10", "--json"],
                              capture_output=True, text=True, env=env)
        assert proc.returncode == 0, proc.stderr
        outs.append(proc.stdout)
    assert outs[0] == outs[1]


def test_dump_writes_observations_and_gauges(capsys, tmp_path):
    code, _, err = run_cli(capsys, "run", MM1, "--horizon", "100", "--warmup", "0", "--dump", str(tmp_path / "d"))
    assert code == 0, err
    sojourn = (tmp_path / "d" / "sojourn.csv").read_text().splitlines()
    assert sojourn[0] == "time,session,turn,value" and len(sojourn) > 10
    gauge = (tmp_path / "d" / "gauge" / "jobs.csv").read_text().splitlines()
    assert gauge[0] == "time,value" and len(gauge) > 10


def test_trace_is_one_json_object_per_line_with_a_rule_name(capsys):
    code, out, err = run_cli(capsys, "trace", LEASE, "--steps", "12")
    assert code == 0, err
    lines = out.splitlines()
    assert len(lines) == 1 + 12  # the header, then the rules (docs/step-trace.md)
    head, *steps = [json.loads(line) for line in lines]
    assert head["format"] == "serq-ref/step-trace" and head["seed"] == 1
    assert all(list(s)[:2] == ["rule", "time"] for s in steps)
    assert steps[0]["rule"] == "workload/arrive"
    assert any(s["rule"] == "pool/admit" for s in steps)


def test_trace_from_skips_earlier_rules(capsys):
    code, out, err = run_cli(capsys, "trace", LEASE, "--from", "3")
    assert code == 0, err
    head, *records = [json.loads(line) for line in out.splitlines()]
    assert head["from"] == 3.0
    times = [r["time"] for r in records]
    assert times and min(times) >= 3


def test_run_time_error_names_the_statement(capsys, tmp_path):
    # seed 002 §3 Branching: "any other value ... is a run-time error"
    f = tmp_path / "guard.sq"
    f.write_text("stage s : fifo;\nworkload { arrive poisson(1); }\nsession {\n  set g = ~uniform(0, 2);\n"
                 "  branch (g) { run s (1); }\n}\nrun { horizon 10; }\n")
    code, out, err = run_cli(capsys, "run", str(f))
    assert code == 1 and out == ""
    assert f"{f}:5:3: error: the branch guard is" in err
    # the source line (indented by two) and a caret under column 3
    assert "\n    branch (g) { run s (1); }\n    ^" in err


MM1 = "examples/single-turn/mm1.sq"


@pytest.mark.parametrize("value", ["1e400", "-1e400", "1e-400"])
def test_a_number_beyond_a_floats_range_is_a_usage_error_naming_the_option(capsys, value):
    # issue 23: --set lambda=1e400 was read as inf and blamed on the program's `arrive` line
    code, out, err = run_cli(capsys, "run", MM1, "--set", f"lambda={value}", "--horizon", "10")
    assert code == 2 and out == ""
    assert f"argument --set: {value} " in err and ("overflows" in err or "underflows" in err)
    assert "usage: serq-ref run" in err and "mm1.sq:" not in err


def test_inf_spelled_out_is_still_a_number():
    from semantics.arguments import number

    assert number("inf") == number("+Infinity") == float("inf") and number("-inf") == -float("inf")
    assert number("0e5") == 0.0 and number("1e308") == 1e308


def test_set_of_an_undeclared_name_is_a_usage_error(capsys):
    # issue 23: it exited 1, as if the program were wrong; the README says usage errors exit 2
    code, out, err = run_cli(capsys, "run", MM1, "--set", "nosuch=1", "--horizon", "10")
    assert code == 2 and out == ""
    assert "--set nosuch: the program declares no let constant nosuch" in err and "lambda, mu, long" in err
    assert "usage: serq-ref run" in err


@pytest.mark.parametrize("argv, usage", [
    (["oracle", "check", "does/not/exist"], "usage: serq-ref oracle check"),
    (["oracle", "replay", "does/not/exist.csv", "--spacing", "1", "--budget", "8", "--max-seqs", "1",
      "--blocks", "4"], "usage: serq-ref oracle replay"),
    (["oracle", "run", "does/not/exist.json"], "usage: serq-ref oracle run"),
    (["oracle", "diverge", "does/not/a.log", "does/not/b.log"], "usage: serq-ref oracle diverge"),
    (["check", "does/not/exist.sq"], "usage: serq-ref check"),
])
def test_each_command_prints_its_own_usage_under_an_error(capsys, argv, usage):
    # issue 23: the oracle commands printed `usage: serq-ref {check,ir,run,trace} FILE [options]`
    code, out, err = run_cli(capsys, *argv)
    assert code == 2 and out == ""
    assert usage in err and "{check,ir,run,trace}" not in err
