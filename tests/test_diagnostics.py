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
from hypothesis import given, settings
from hypothesis import strategies as st

from semantics.cli import main
from semantics.errors import ProgramError
from semantics.syntax.parser import parse_text

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
    assert code == 0 and len(out.splitlines()) == 1 + 3  # the header, then the rules


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


# --------------------------------------------------------------------------
# Bad input of every kind
# --------------------------------------------------------------------------


def test_a_used_file_that_is_not_utf8_is_an_error_at_its_use(capsys, tmp_path):
    """Every file the program reads gets the main file's treatment: a used file that is not UTF-8
    crashed (`internal error … UnicodeDecodeError`, exit 3)."""
    (tmp_path / "lib.sq").write_bytes(b"let a = 1; // caf\xe9\n")
    path = write(tmp_path, 'use "lib.sq";\n' + SMALL)
    code, _, err = run_cli(capsys, "check", path)
    assert code == 1
    assert err.startswith(f"{path}:1:5: error: `lib.sq` ({tmp_path / 'lib.sq'}) is not UTF-8 text "
                          "(invalid continuation byte at byte 17)\n")
    (tmp_path / "main.sq").write_bytes(b"let a = 1; // caf\xe9\n")
    code, _, err = run_cli(capsys, "check", str(tmp_path / "main.sq"))
    assert (code, err) == (1, f"{tmp_path / 'main.sq'}: error: not UTF-8 text (invalid continuation byte at byte 17)\n")
    (tmp_path / "dir.sq").mkdir()
    path = write(tmp_path, 'use "dir.sq";\n' + SMALL, "usesdir.sq")
    code, _, err = run_cli(capsys, "check", path)
    assert code == 1 and f"{path}:1:5: error: `dir.sq` ({tmp_path / 'dir.sq'}) is a directory, not a program" in err


@pytest.mark.parametrize(("argv", "message"), [
    (["--horizon", "-5"], "argument --horizon: must be positive (a time, or inf with --arrivals N): -5"),
    (["--horizon", "0"], "argument --horizon: must be positive (a time, or inf with --arrivals N): 0"),
    (["--warmup", "-1"], "argument --warmup: must be a finite time, 0 or later: -1"),
    (["--warmup", "inf"], "argument --warmup: must be a finite time, 0 or later: inf"),
    (["--arrivals", "0"], "argument --arrivals: must be at least 1: an arrival limit of 0 would measure nothing"),
    (["--seed", "-1"], "argument --seed: must not be negative: -1"),
    (["--horizon", "inf"], "--horizon inf: no arrival limit ends the run, so it would never stop; give --arrivals N "
                           "too (an infinite horizon runs until N arrivals have drained), or a finite --horizon"),
    (["--warmup", "200"], "--warmup 200: the warm-up (200) ends at or after the horizon (100): nothing would be "
                          "measured; give a longer --horizon or a shorter --warmup"),
])
def test_command_line_values_are_usage_errors_naming_the_option(capsys, tmp_path, argv, message):
    """Never blamed with a caret on the file's run block; exit 2."""
    path = write(tmp_path, SMALL + "run { horizon 100; }\n")
    code, out, err = run_cli(capsys, "run", path, *argv)
    assert (code, out) == (2, "")
    assert err.startswith(f"serq-ref: {message}\n"), err
    assert "^" not in err


def test_an_arrival_limit_on_a_closed_workload_is_refused_where_it_was_given(capsys, tmp_path):
    path = write(tmp_path, "stage g : delay;\nworkload { arrive batch(2); }\nsession { run g (1); }\n"
                           "run { horizon 10; arrivals 3; }\n")
    code, _, err = run_cli(capsys, "check", path)
    assert code == 1 and err.startswith(f"{path}:4:19: error: `arrivals 3` needs an open workload (arrive poisson "
                                        "or arrive renewal), and this program's is a batch\n")
    path = write(tmp_path, "stage g : delay;\nworkload { arrive batch(2); }\nsession { run g (1); }\n"
                           "run { horizon 10; }\n", "ok.sq")
    code, _, err = run_cli(capsys, "run", path, "--arrivals", "3")
    assert code == 2 and err.startswith("serq-ref: --arrivals 3: an arrival limit needs an open workload")


def test_an_unwritable_dump_directory_is_refused_before_the_run(capsys, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("in the way")
    path = write(tmp_path, "stage srv : fifo;\nworkload { arrive poisson(1); }\n"
                           "session { run srv (1); observe x = now; }\nrun { horizon 1e6; }\n")
    code, out, err = run_cli(capsys, "run", path, "--dump", str(blocker / "out"))
    assert (code, out) == (2, "")  # no report: the run did not happen
    assert err.startswith(f"serq-ref: --dump {blocker / 'out'}: cannot write {blocker / 'out'}: Not a directory")


def test_an_ir_version_that_is_a_string_says_so(capsys, tmp_path):
    path = write(tmp_path, SMALL + "run { horizon 10; }\n")
    run_cli(capsys, "ir", path)
    for version, said in (('"13"', 'gives its version as "13", not the number 13'),
                          ("14", "is IR version 14")):
        text = (tmp_path / "prog.sq").read_text()
        code, out, _ = run_cli(capsys, "ir", path)
        ir = json.loads(out)
        ir["version"] = json.loads(version)
        bad = write(tmp_path, json.dumps(ir), "v.json")
        code, _, err = run_cli(capsys, "check", bad)
        # located at the version's value (issue 23, badin4), the long line cut short
        assert code == 1 and err.startswith(f"{bad}:1:13: error: the IR file {said}; serq-ref reads IR version 13\n"), err
        assert err.endswith("\n" + " " * 14 + "^\n"), err
        assert text


def test_a_seed_written_in_the_source_is_an_exact_integer(capsys, tmp_path):
    path = write(tmp_path, SMALL + "run { horizon 10; seed 9007199254740993; }\n")
    code, out, _ = run_cli(capsys, "ir", path)
    assert code == 0 and json.loads(out)["seed"] == 9007199254740993  # not ...992, the float nearest
    code, out, _ = run_cli(capsys, "ir", path, "--seed", "9007199254740993")
    assert json.loads(out)["seed"] == 9007199254740993


def test_a_run_of_infinite_work_is_an_error_naming_the_statement(capsys, tmp_path):
    """`run g (1 / z)` with z = 0 was linked with the false warning "can be negative" and the session
    never finished, silently."""
    path = write(tmp_path, "let z = 0;\nstage g : fifo;\nworkload { arrive batch(1); }\n"
                           "session { run g (1 / z); }\nrun { horizon 10; }\n")
    code, _, err = run_cli(capsys, "run", path)
    assert (code, err.splitlines()[0]) == (1, f"{path}:4:11: error: the work of `run g` is inf: the job would hold "
                                              "its stage for ever and the session never finish")
    path = write(tmp_path, "stage g : fifo;\nworkload { arrive batch(1); }\n"
                           "session { set z = 0; run g (1 / z); }\nrun { horizon 10; }\n", "computed.sq")
    code, _, err = run_cli(capsys, "run", path)
    assert code == 1 and "warning" not in err
    assert err.splitlines()[0] == f"{path}:3:22: error: the run's work is inf: the job would never finish (at time 0)"


@pytest.mark.parametrize(("statement", "owner"), [
    ("set serial = 7;", "the session's serial number, given at its arrival"),
    ("set cached = 99;", "what the last admission consumed from the prefix cache"),
    ("set turn_no = 5;", "the turn number, counted by `turn;`"),
    ("set computed = 1;", "the position a preempted hold had computed"),
])
def test_assigning_a_built_in_attribute_the_semantics_owns_is_an_error(capsys, tmp_path, statement, owner):
    path = write(tmp_path, f"stage g : fifo;\nworkload {{ arrive batch(1); }}\nsession {{ {statement} run g (1); }}\n")
    code, _, err = run_cli(capsys, "check", path)
    name = statement.split()[1]
    assert (code, err.splitlines()[0]) == (1, f"{path}:3:11: error: `set {name}`: `{name}` is a built-in attribute "
                                              f"the semantics sets ({owner}); a program reads it and does not assign "
                                              "it: give the value a name of its own")


def test_a_trace_owns_its_columns_but_a_program_without_one_may_set_them(capsys, tmp_path):
    (tmp_path / "t.csv").write_text("session,turn,new,out,think,forced\n0,1,2,3,1,0\n")
    path = write(tmp_path, 'stage g : delay;\nworkload { arrive batch(1); trace "t.csv"; }\n'
                           "session { turn; set out = 1; run g (out); }\n")
    code, _, err = run_cli(capsys, "check", path)
    assert code == 1 and "`set out`: `out` is a built-in attribute the semantics sets (a column of the trace" in err
    path = write(tmp_path, "stage g : delay;\nworkload { arrive batch(1); }\nsession { set out = 1; run g (out); }\n",
                 "notrace.sq")
    assert run_cli(capsys, "check", path)[0] == 0


def test_a_program_that_can_do_nothing_gets_a_warning(capsys, tmp_path):
    path = write(tmp_path, "stage srv : fifo;\nsession { run srv (1); }\n")
    code, _, err = run_cli(capsys, "check", path)
    assert (code, err) == (0, f"{path}: warning: the program starts no session: its workload has no arrival "
                              "process (arrive poisson, renewal, closed or batch, or a trace), so a run does nothing\n")
    path = write(tmp_path, "stage srv : fifo;\nworkload { arrive poisson(1); }\n", "nosession.sq")
    code, _, err = run_cli(capsys, "check", path)
    assert code == 0 and err.startswith(f"{path}:2:12: warning: the sessions do nothing: the program has arrivals "
                                        "but no session statements")
    code, _, err = run_cli(capsys, "check", str(ROOT / "examples/lib/vllm.sq"))  # a library: definitions only
    assert (code, err) == (0, "")


# --------------------------------------------------------------------------
# Parse errors that say what is wrong
# --------------------------------------------------------------------------

PARSE_ERRORS = [
    # a misspelled keyword names the keyword it is nearest to (it said "expected 'pull', found 'srv'")
    ("stagee srv : fifo;\n", 1, 1, "unknown item `stagee` (did you mean `stage`?)"),
    ("stage srv : fifo;\nsesion { run srv (1); }\n", 2, 1, "unknown item `sesion` (did you mean `session`?)"),
    ("stage srv : fifo;\nworkloads { arrive poisson(1); }\n", 2, 1,
     "unknown item `workloads` (did you mean `workload`?)"),
    ("frobnicate;\n", 1, 1, "unknown item `frobnicate`: an item begins with let, use, def, pool, stage, workload, "
                            "session, server, queue, run, share, gauge, or is `QUEUE pull QUEUE …;`"),
    # ... and a statement's ("expected '(', found 's'")
    ("stage srv : fifo;\nsession { obsrve s = 1; }\n", 2, 11, "unknown statement `obsrve` (did you mean `observe`?)"),
    ("stage srv : fifo;\nsession { rn srv (1); }\n", 2, 11, "unknown statement `rn` (did you mean `run`?)"),
    # ... and any other word near the keyword expected there
    ("pool kv { caap 10; }\n", 1, 11, "unknown word `caap` (did you mean `cap`?)"),
    ("workload { arive poisson(1); }\n", 1, 12, "unknown word `arive` (did you mean `arrive`?)"),
    ("stage srv : fifoo;\n", 1, 13, "unknown word `fifoo` (did you mean `fifo`?)"),
    ("stage srv : fifo;\nsession { run srv (1); }\nrun { horizn 5; }\n", 3, 7,
     "unknown word `horizn` (did you mean `horizon`?)"),
    # a missing `;` is named at the end of the statement that lacks it (it said "expected 'in', found 'srv'",
    # one line late)
    ("stage srv : fifo;\nsession {\n  set t0 = now\n  run srv (1);\n}\n", 3, 15,
     "missing `;` at the end of this statement (the next line begins with `run`)"),
    ("stage srv : fifo;\nsession {\n  set x = 1\n  run srv (1);\n}\n", 3, 12,
     "missing `;` at the end of this statement (the next line begins with `run`)"),
    ("let x = 1\nstage srv : fifo;\n", 1, 10, "missing `;` at the end of this statement (the next line begins "
                                             "with `stage`)"),
    ("stage srv : fifo;\nsession { run srv (1) }\n", 2, 22, "missing `;` at the end of this statement (the block "
                                                             "ends)"),
    # a missing `}` names the unclosed block with the line of its `{` (it said "expected '(' or a name,
    # found '{'" at the next item)
    ("stage srv : fifo;\nworkload { arrive poisson(1); }\nsession {\n  run srv (1);\n  branch (serial == 0) {\n"
     "    run srv (2);\n\nrun { horizon 10; }\n", 5, 24,
     "this `{` (line 5) is never closed: a `}` is missing before line 8 (the `{` of line 3 is open too)"),
    ("stage srv : fifo;\nsession {\n  run srv (1);\n", 2, 9,
     "this `{` (line 2) is never closed: a `}` is missing before the end of the file"),
    # clause order (it said "expected '{', found 'reuse'")
    ("pool kv { cap 10; }\nstage srv : fifo;\nsession {\n  hold kv (1) at admission (h = 1) reuse (1) { run srv (1); "
     "} cache (1);\n}\n", 4, 36,
     "`reuse` is out of place: a hold's clauses go in the order hold POOL (n) [reserve (r)], POOL (n) … [reuse (e)] "
     "[content (K : L, …)] [at admission (NAME = e, …)] { … } [cache (e)] [lease POOL (t)]"),
    ("pool kv { cap 10; }\nstage srv : fifo;\nsession {\n  hold kv (1) { run srv (1); } lease kv (1) cache (1);\n}\n",
     4, 45, "`cache (…)` here is read as a statement after the hold it was meant for: a hold's clauses go in the order "
            "hold POOL (n) [reserve (r)], … [reuse (e)] [content (K : L, …)] [at admission (…)] { … } [cache (e)] "
            "[lease POOL (t)]"),
]


@pytest.mark.parametrize(("text", "line", "col", "message"), PARSE_ERRORS)
def test_a_parse_error_says_what_is_wrong_where_it_is(capsys, tmp_path, text, line, col, message):
    path = write(tmp_path, text)
    code, out, err = run_cli(capsys, "check", path)
    assert (code, out) == (1, "")
    assert err.splitlines()[0] == f"{path}:{line}:{col}: error: {message}"


def test_a_parse_error_the_diagnosis_does_not_recognise_keeps_the_parsers_message(capsys, tmp_path):
    path = write(tmp_path, "stage srv : fifo;\nsession { run srv (1 + ); }\n")
    code, _, err = run_cli(capsys, "check", path)
    assert code == 1 and err.splitlines()[0].startswith(f"{path}:2:24: error: expected ")


EXAMPLE_TEXTS = [p.read_text(encoding="utf-8") for p in sorted((ROOT / "examples").glob("*/*.sq"))]


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_the_diagnosis_of_any_broken_program_is_a_located_program_error(data):
    """Whatever the damage (a deletion, an insertion of program text, a duplicated span), a syntax error
    stays a ProgramError with a place, never a crash of the diagnosis."""
    text = data.draw(st.sampled_from(EXAMPLE_TEXTS))
    start = data.draw(st.integers(0, len(text)))
    end = data.draw(st.integers(start, min(len(text), start + 40)))
    inserted = data.draw(st.sampled_from(["", "}", "{", ";", "hold", "stagee", " now", "(", "reuse (1)", "\nrun "]))
    broken = text[:start] + inserted + text[end:]
    try:
        parse_text(broken, "broken.sq")
    except ProgramError as error:
        assert error.span is not None and error.message


# --------------------------------------------------------------------------
# The command line and the report
# --------------------------------------------------------------------------


@pytest.mark.parametrize("command", ["check", "ir", "run", "trace"])
def test_every_option_of_every_subcommand_has_help_saying_its_default(command):
    """"Every option of every subcommand has help text saying what it overrides and its default"."""
    from semantics.cli import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command").choices[command]
    for action in sub._actions:
        if action.dest == "help":
            continue
        assert action.help, f"{command} {action.option_strings or action.dest} has no help"
        if action.option_strings and action.dest != "rules":
            assert "Default" in action.help, f"{command} {action.option_strings}: {action.help}"
    for option in ("--horizon", "--warmup", "--seed", "--arrivals"):
        action = next(a for a in sub._actions if option in a.option_strings)
        assert "overrides `run {" in action.help


def test_a_program_is_read_from_standard_input_with_a_dash(capsys, tmp_path, monkeypatch):
    import io

    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(SMALL.encode())))
    code, out, err = run_cli(capsys, "check", "-")
    assert (code, out, err) == (0, "OK: 0 pool(s), 1 stage(s), 9 attribute(s), 3 block(s)\n", "")
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(b"stage s : fifo;\nsession { rn s (1); }\n")))
    code, _, err = run_cli(capsys, "check", "-")
    assert (code, err) == (1, "<stdin>:2:11: error: unknown statement `rn` (did you mean `run`?)\n"
                              "  session { rn s (1); }\n            ^^\n")
    path = write(tmp_path, SMALL + "run { horizon 50; }\n")
    ir_text = run_cli(capsys, "ir", path)[1]
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(ir_text.encode())))  # an IR file too
    code, out, _ = run_cli(capsys, "run", "-", "--json")
    assert code == 0 and json.loads(out)["horizon"] == 50.0


def test_trace_without_steps_stops_at_a_default_and_says_so(capsys, tmp_path):
    from semantics.cli import DEFAULT_TRACE_STEPS

    path = write(tmp_path, SMALL + "run { horizon 1e9; }\n")
    code, out, err = run_cli(capsys, "trace", path)
    assert code == 0 and len(out.splitlines()) == 1 + DEFAULT_TRACE_STEPS  # the header, then the rules
    assert err == (f"serq-ref: the trace stopped after {DEFAULT_TRACE_STEPS:,} rules (--steps {DEFAULT_TRACE_STEPS}, "
                   "the default); `--steps all` prints every one\n")
    code, out, err = run_cli(capsys, "trace", path, "--horizon", "20", "--steps", "all")
    assert code == 0 and err == "" and 0 < len(out.splitlines()) < DEFAULT_TRACE_STEPS


def test_trace_takes_a_horizon_shorter_than_the_files_warmup(capsys, tmp_path):
    """A trace measures nothing, so a --horizon before the file's warm-up is no error there (run refuses it)."""
    path = write(tmp_path, SMALL + "run { horizon 100; warmup 50; }\n")
    code, out, err = run_cli(capsys, "trace", path, "--horizon", "10", "--steps", "all")
    assert (code, err) == (0, "") and out.splitlines()
    assert run_cli(capsys, "run", path, "--horizon", "10")[0] == 2


def test_the_report_header_labels_each_figure_with_its_window(capsys, tmp_path):
    path = write(tmp_path, SMALL + "run { horizon 200; warmup 10; seed 1; }\n")
    code, out, _ = run_cli(capsys, "run", path)
    first = out.splitlines()[0]
    assert first.startswith("run: horizon 200 end 200 warmup 10 seed 1 | whole run: events ")
    assert " arrivals " in first.split("|")[1] and first.split("|")[2].startswith(" after warm-up: ended ")
    path = write(tmp_path, SMALL + "run { horizon 200; seed 1; }\n", "nowarmup.sq")
    first = run_cli(capsys, "run", path)[1].splitlines()[0]
    assert "|" not in first and first.startswith("run: horizon 200 end 200 warmup 0 seed 1 events ")


def test_a_pools_nan_wait_says_why(capsys, tmp_path):
    path = write(tmp_path, "pool a { cap 2; }\npool b { cap 5; }\nstage g : fifo;\nworkload { arrive poisson(1); }\n"
                           "session { hold a (1), b (1) { run g (~exp(0.5)); } }\nrun { horizon 200; }\n")
    code, out, _ = run_cli(capsys, "run", path)
    notes = [line for line in out.splitlines() if line.startswith("note: pool")]
    assert code == 0 and len(notes) == 1
    assert notes[0].startswith("note: pool b's wait is nan: its ") and notes[0].endswith(
        "admission(s) were of holds that waited in another pool's queue (a hold on several pools waits in its "
        "first pool's, seed 002 §3 Ties)")


# --------------------------------------------------------------------------
# Warnings that are true
# --------------------------------------------------------------------------

EXAMPLES = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "examples").glob("*/*.sq"))
USER_PROGRAMS = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "tests/programs").rglob("*.sq"))  # every one
# and the IR files: kv_per_turn_while.json is kv_per_turn.sq's agent with its tool-call loop a `while`
# (`While` is IR only; version-13 files compiled elsewhere loop so: issue 23, "sessions that loop over tool
# calls with a `while`, a pool of KV per turn")
USER_PROGRAMS += sorted(str(p.relative_to(ROOT)) for p in (ROOT / "tests/programs").rglob("*.json"))


@pytest.mark.parametrize("path", EXAMPLES + USER_PROGRAMS)
def test_no_example_and_no_program_of_the_kinds_users_write_prints_a_warning(capsys, path):
    """Every example printed one to seven warnings, and a vLLM replay, PD disaggregation, a spill and a
    multi-turn agent false ones. The linker now gives Z3 the relations the semantics guarantees along the
    path to a statement (semantics/link/paths.py: the sets on the way, the guards, `cached` within the
    hold's reuse, the trace's columns as the file has them), and warns only of what can stop a run."""
    code, out, err = run_cli(capsys, "check", str(ROOT / path))
    assert code == 0 and out.startswith("OK: ") and err == "", err


@pytest.mark.parametrize(("session", "message"), [
    # a loop-carried value: the second iteration reads x = 1
    ("set x = 0;\n  hold kv (1) {\n    loop {\n      grow kv (1 - x);\n      set x = x + 1;\n      run g (1);\n    }\n"
     "  }", "the amount of `grow kv` can be negative: -1 when `x` = 2"),
    # a preempted hold runs its body again, with what the body assigned before
    ("set x = 0;\n  hold kv (1) {\n    grow kv (1 - x);\n    set x = x + 1;\n    run g (1);\n  }",
     "the amount of `grow kv` can be negative: -1 when `x` = 2"),
    # a branch passed says nothing about the values after it
    ("set a = ~uniform(-1, 1);\n  branch (a > 0) { run g (1); }\n  hold kv (a) { run g (1); }",
     "the units of the hold on `kv` can be negative: -1 when `a` = -1"),
    # a guard that can be other than 0 or 1 is a run-time error
    ("set a = ~uniform(0, 2);\n  branch (a) { run g (1); }",
     "the guard of this branch can be 2 when `a` = 2, which is neither 0 nor 1 (a run-time error); write "
     "`branch with (p)` for a draw"),
    # a family index outside the family is a run-time error
    ("run h[serial] (1);", "the index of `h[serial]` can be 2 when `serial` = 2, which is not a member index 0..1"),
])
def test_a_warning_a_run_can_reach_is_still_given(capsys, tmp_path, session, message):
    path = write(tmp_path, "pool kv { cap 100; preempt lifo; }\nstage g : delay;\nstage h[2] : delay;\n"
                           f"workload {{ arrive batch(3); }}\nsession {{\n  {session}\n}}\n")
    code, _, err = run_cli(capsys, "check", path)
    warnings = [line.split(": warning: ")[1] for line in err.splitlines() if ": warning: " in line]
    assert code == 0 and warnings == [message], err


def test_a_guard_that_ends_the_session_is_known_after_it(capsys, tmp_path):
    path = write(tmp_path, "pool kv { cap 100; }\nstage g : delay;\nworkload { arrive batch(1); }\nsession {\n"
                           "  set a = ~uniform(-1, 1);\n  branch (a < 0) { end; }\n  hold kv (a) { run g (1); }\n}\n")
    assert run_cli(capsys, "check", path)[2] == ""


def test_what_only_defined_outcomes_are_not_warned_but_every_value_is_an_error(capsys, tmp_path):
    """A run of zero work or less completes at once; a hold above its pool's cap is rejected and counted
    (`rej`): some values are no warning; every value is still an error."""
    path = write(tmp_path, "pool kv { cap 100; }\nstage g : delay;\nworkload { arrive batch(1); }\nsession {\n"
                           "  set a = ~uniform(-1, 1);\n  run g (a);\n  set b = ~uniform(50, 150);\n"
                           "  hold kv (b) { run g (1); }\n}\n")
    assert run_cli(capsys, "check", path)[2] == ""
    path = write(tmp_path, "pool kv { cap 100; }\nstage g : delay;\nworkload { arrive batch(1); }\nsession {\n"
                           "  set b = ~uniform(150, 200);\n  hold kv (b) { run g (1); }\n}\n", "always.sq")
    code, _, err = run_cli(capsys, "check", path)
    assert code == 1 and "the units of the hold on `kv` can never fit in the pool, whose cap is 100" in err


# --------------------------------------------------------------------------
# No silent hang
# --------------------------------------------------------------------------


@pytest.mark.parametrize(("clause", "what", "short"), [
    ("arrive poisson(1e17);", "arrive poisson(1e+17) over the horizon 1 is about 1e+17 arrivals", "1e-15"),
    ("arrive renewal(1e-300);", "arrive renewal(1e-300) over the horizon 1 is about 1e+300 arrivals", "1e-297"),
])
def test_arrivals_at_an_absurd_rate_stop_before_the_run_naming_the_limit(capsys, tmp_path, clause, what, short):
    """They ran for minutes with the progress bar at 0 %."""
    path = write(tmp_path, f"stage g : fifo;\nworkload {{ {clause} }}\nsession {{ run g (1); }}\nrun {{ horizon 1; }}\n")
    code, out, err = run_cli(capsys, "run", path)
    assert (code, out) == (1, "")
    assert err.splitlines()[0] == (f"{path}:2:12: error: {what}; serq-ref runs at most 100,000,000 (it takes about "
                                   "50 000 a second): a rate this high is a model of its own (a shorter horizon, or "
                                   "`arrivals N`)")
    assert run_cli(capsys, "run", path, "--horizon", short)[0] == 0  # the same rate over a short horizon runs
    assert run_cli(capsys, "check", path)[0] == 0  # a limit of a run, not of the program


def test_a_fifo_line_has_no_limit(capsys, tmp_path, monkeypatch):
    """fifo(1e9) with 40 000 jobs in service took 81 s (quadratic: the line and the pending completions
    are tuples copied at every step), and a fifo stage stopped at 20 000 jobs (MAX_JOBS_AT_STAGE, a limit
    of the implementation). The fast engine keeps a long line and its events in chunks
    (semantics/fast/chunks.py; benchmarks/bench_population.py measures the cost per session as the line
    doubles): no limit, and the definition's result (which copies its tuples) byte for byte. (Short
    chunks here, so that 700 jobs make many.)"""
    from semantics.fast import chunks

    monkeypatch.setattr(chunks, "LONG", 64)
    monkeypatch.setattr(chunks, "SIZE", 16)
    for kind in ("fifo(1e9)", "fifo(1)", "delay"):
        path = write(tmp_path, f"stage g : {kind};\nworkload {{ arrive batch(700); }}\n"
                               "session { set t0 = now; run g (~exp(1)); observe w = now - t0; }\n"
                               "run { horizon 1e9; }\n")
        code, fast_out, err = run_cli(capsys, "run", path, "--json")
        assert (code, err) == (0, "")
        assert '"ended": 700' in fast_out
        assert run_cli(capsys, "run", path, "--json", "--engine", "definition")[1] == fast_out


def test_a_limit_of_serq_ref_is_its_own_class_not_a_trap_of_the_program(tmp_path, monkeypatch):
    """RunError keeps traps of the program; a limit of the implementation (more evictions at once than
    MAX_EVICTIONS; a fifo line past MAX_JOBS_AT_STAGE while that limit exists) is a LimitError that says
    it is serq-ref's, located at its statement as a RunError is (issue 22 §2)."""
    from semantics.errors import LimitError, RunError, RunStop
    from semantics.pipeline import load
    from semantics.smallstep import pools
    from semantics.smallstep.driver import run

    monkeypatch.setattr(pools, "MAX_EVICTIONS", 10)
    evicting = write(tmp_path, "pool kv { cap 100; block 1; evict lru; }\nstage g : delay;\n"
                               "workload { arrive batch(1); }\n"
                               "session { hold kv (60) { run g (1); } cache (60); hold kv (100) { run g (1); } }\n"
                               "run { horizon 100; }\n", "evict.sq")
    with pytest.raises(LimitError) as stopped:
        run(load(evicting).program)
    assert not isinstance(stopped.value, RunError) and isinstance(stopped.value, RunStop)
    assert "a limit of its implementation" in stopped.value.message and stopped.value.stmt is not None
    # a trap of the program is still a RunError
    trap = write(tmp_path, "pool kv { cap 10; }\nworkload { arrive batch(1); }\nsession { hold kv (1) { load kv (5); } }\n"
                           "run { horizon 10; }\n", "trap.sq")
    with pytest.raises(RunError):
        run(load(trap).program)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(st.tuples(st.just("enter"), st.sampled_from([0.0, 0.5, 1.0, 1.0, 2.0, 7.25])),
                          st.tuples(st.just("first"), st.just(0.0)),
                          st.tuples(st.just("leave"), st.integers(0, 40))), max_size=60))
def test_a_ps_stages_heap_of_jobs_is_the_sorted_tuple_it_replaced(operations):
    """A ps stage's jobs were a tuple sorted by (finish tag, start order), copied whole at every step
    (`batch(1e6)` on a delay stage ran for minutes in 770 MB); they are a persistent leftist heap now,
    checked here against the tuple: the same jobs, in the same order, after any joins, completions of
    the first, and jobs taken off early."""
    from semantics.smallstep.stages.ps import NO_JOBS, PsJob

    heap, model, next_id = NO_JOBS, (), 0
    for operation, value in operations:
        if operation == "enter":
            job = PsJob(next_id, next_id, 0.0, 0.0, None, value)
            next_id += 1
            heap, model = heap.with_job(job), tuple(sorted(model + (job,), key=lambda j: (j.tag, j.job_id)))
        elif operation == "first" and model:
            assert heap.first() == model[0]
            heap, model = heap.without_first(), model[1:]
        elif operation == "leave":
            heap, model = heap.without(int(value)), tuple(j for j in model if j.job_id != int(value))
        assert len(heap) == len(model) and bool(heap) == bool(model)
        assert tuple(heap) == model


# -- long source lines: a campaign file's line is a whole case ---------------------------------

def test_a_long_source_line_is_shown_around_the_caret(tmp_path, capsys) -> None:
    """A located error in a line of thousands of characters shows at most
    LINE_WINDOW of them around the column, cut with `…`, the caret under
    the same character."""
    from semantics.errors import LINE_WINDOW, Span, format_diagnostic

    line = "a" * 3000 + "X" + "b" * 3000
    text = format_diagnostic("error", "here", Span("f.jsonl", 1, 3001), None, line)
    _, shown, caret = text.splitlines()
    assert shown.startswith("  …") and shown.endswith("…") and len(shown) == 2 + LINE_WINDOW + 2
    assert shown[caret.index("^")] == "X" and caret.strip() == "^"
    short = format_diagnostic("error", "here", Span("f.sq", 1, 3), None, "abcdef")
    assert short.splitlines()[1:] == ["  abcdef", "    ^"]
    start = format_diagnostic("error", "here", Span("f.jsonl", 1, 1), None, line)
    assert start.splitlines()[1] == "  " + line[:LINE_WINDOW] + "…" and start.splitlines()[2] == "  ^"


def test_a_replay_campaign_is_no_scenario_campaign(capsys) -> None:
    code = main(["lean", "check", str(ROOT / "oracle" / "data" / "campaign" / "replays.jsonl")])
    err = capsys.readouterr().err
    assert code == 1
    assert err.splitlines()[0].endswith("replays.jsonl:1:1: error: this case is 'replay', not a scenario: a campaign "
                                        "file here is one of scenarios (a replay answers per turn: `serq-ref oracle "
                                        "campaign N --seed 1 --kind replay --recorded FILE` checks those)")
    assert len(err.splitlines()[1]) < 130
