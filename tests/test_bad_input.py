"""Bad input, third round (issue 23), a test per class.

A new user's bad inputs that crashed, answered silently, were blamed on the
wrong place or hid one another. Each section is one class of the issue; the
usage classes (--set, a number beyond a float's range, each command's usage
line) are in tests/test_cli.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from strategies import generated
from test_diagnostics import SMALL, run_cli, write  # the diagnostics tests' program and helpers

ROOT = Path(__file__).resolve().parents[1]



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


QUOTE = "'s "  # the distribution's name ends there: ~uniform's

#: for each of DRAWS, a factor m such that with x = serial * m the first session (serial 0) draws the bad
#: argument and the second (serial 1) a good one: the linker can tell only that some run may draw it
SOMETIMES = [-1, 1, -1.5, 2, -5, 1, 0.5, 3, 0.5, 1]


@pytest.mark.parametrize("_statement, computed, message", DRAWS)
def test_a_computed_draw_argument_outside_its_domain_for_every_run_is_a_link_error(capsys, tmp_path, _statement,
                                                                                 computed, message):
    # issue 23: `branch with (a + 0.5)` with a computed to 1 linked, and stopped only the run
    path = write(tmp_path, "stage srv : fifo;\nworkload { arrive poisson(0.5); init { set x = 0; } }\n"
                           f"session {{\n  run srv (1);\n  {computed}\n}}\nrun {{ horizon 50; }}\n")
    code, out, err = run_cli(capsys, "check", path)
    if "inf" in computed:  # the linker's reals have no inf: an infinite bound is the run's error alone
        assert code == 0 and err == "", err
        return
    assert code == 1 and out == ""
    assert err.startswith(f"{path}:5:3: error: {message.split(QUOTE)[0]}{QUOTE}") and " is never " in err, err
    assert "(e.g. " in err and err.count("error:") == 1, err


@pytest.mark.parametrize("_statement, computed, message, factor", [d + (m,) for d, m in zip(DRAWS, SOMETIMES)])
def test_a_computed_draw_argument_outside_its_domain_stops_the_run_naming_the_statement(capsys, tmp_path,
                                                                                      _statement, computed, message,
                                                                                      factor):
    path = write(tmp_path, "stage srv : fifo;\nworkload { arrive batch(2); }\n"
                           f"session {{\n  set x = serial * {factor}; run srv (1);\n  {computed}\n}}\n"
                           "run { horizon 50; }\n")
    code, out, err = run_cli(capsys, "check", path)
    assert code == 0, err
    if "inf" not in computed:  # a warning that some run draws outside the domain, with its witness
        assert err.startswith(f"{path}:5:3: warning: {message.split(QUOTE)[0]}{QUOTE}") and " can be " in err, err
        assert "when `x` = 0" in err and "when it is drawn" in err.replace("where it is drawn", "when it is drawn")
    code, out, err = run_cli(capsys, "run", path)
    assert code == 1 and out == ""
    assert f"{path}:5:3: error: {message}" in err and "(at time " in err, err


@pytest.mark.parametrize("session, warned", [
    # a draw in a conditional's arm, or right of && / ||, is asked where the run evaluates it
    ("set b = serial - 1; run srv (b >= 0 ? ~exp(b) : 1);", False),
    ("set b = serial - 1; run srv (b < 0 ? 1 : ~exp(b));", False),
    ("set b = serial - 1; branch ((b >= 0) && ~bernoulli(b)) { end; } else { end; }", False),
    ("set b = serial - 1; branch ((b < 0) || ~bernoulli(b)) { end; } else { end; }", False),
    ("set b = serial - 1; run srv (b < 0 ? ~exp(b) : 1);", True),
    # a run that went past a draw found its arguments in their domains
    ("set b = serial - 1; run srv (~exp(b)); run srv (~exp(b) + ~uniform(b, b + 1));", True),
    ("set b = serial; run srv (~exp(b)); run srv (~uniform(b - 1, 2));", False),
])
def test_a_draw_argument_is_asked_only_where_a_run_evaluates_it(capsys, tmp_path, session, warned):
    path = write(tmp_path, "stage srv : fifo;\nworkload { arrive batch(3); }\n"
                           f"session {{\n  {session}\n}}\nrun {{ horizon 50; }}\n")
    code, out, err = run_cli(capsys, "check", path)
    assert code == 0, err
    assert err.count("warning:") == (1 if warned else 0), err
    code, out, err = run_cli(capsys, "run", path)
    assert (code == 1 and "error: ~exp's mean is -1" in err) == warned, err


def test_draws_inside_their_domains_are_no_error(capsys, tmp_path):
    path = write(tmp_path, "stage srv : fifo;\nworkload { arrive poisson(0.5); }\nsession {\n"
                           "  branch with (0) { end; } else { run srv (~uniform(1, 1)); }\n"
                           "  branch with (1) { run srv (~erlang(3, 0) + ~h2(0, 1) + ~exp(0) + ~det(-1)); } "
                           "else { end; }\n}\nrun { horizon 50; }\n")
    code, out, err = run_cli(capsys, "run", path)
    assert code == 0 and err == "", err


# --------------------------------------------------------------------------
# A trace: every cell checked where it is read, located in the trace and at the program's `trace`
# --------------------------------------------------------------------------

HEADER = "session,turn,new,out,think,forced\n"
TRACE_CASES = [  # (rows after the header, line, column, message)
    ("0,1,-5,3,0,0\n", 2, 5, "the trace's column `new` is -5: it is a number of tokens, a whole number, 0 or more"),
    ("0,1,5,3,0,0\n0,2,5,2.5,0,0\n", 3, 7, "the trace's column `out` is 2.5: it is a number of tokens, a whole"),
    ("0,1,5,3,-1,0\n", 2, 9, "the trace's column `think` is -1: it is a time, a finite number, 0 or more"),
    ("0,1,5,3,0,2\n", 2, 11, "the trace's column `forced` is 2: it is 0 or 1"),
    ("0,1,five,3,0,0\n", 2, 5, "the trace's column `new` is 'five', not a number"),
    ("0,1,5,3\n", 2, 8, "the trace's column `think` is missing in this row"),
    ("0,1,5,3,,0\n", 2, 9, "the trace's column `think` is missing in this row"),
    ("-1,1,5,3,0,0\n", 2, 1, "the trace's column `session` is -1: it is a session number"),
    ("0,0,5,3,0,0\n", 2, 3, "the trace's column `turn` is 0: it is a turn number, a whole number, 1 or more"),
    ("0,1,5,3,0,0\n0,1,6,3,0,0\n", 3, 3, "session 0's turn 1 is given twice (line 2 and here)"),
    ("0,1,5,3,0,0\n0,3,6,3,0,0\n", 3, 1, "session 0 has turns 1, 3 but no turn 2"),
]

REPLAY = ["--spacing", "3", "--budget", "64", "--max-seqs", "4", "--blocks", "20"]
TRACE_PROGRAM = """stage gate : delay;
workload { arrive batch(2); trace "t.csv"; }
session { turn; loop { run gate (new + out + think); branch (more) { turn; } else { end; } } }
run { horizon 20; seed 1; }
"""


@pytest.mark.parametrize("rows, line, col, message", TRACE_CASES)
def test_a_bad_trace_cell_is_located_in_the_trace_for_the_replay(capsys, tmp_path, rows, line, col, message):
    # issue 23: oracle replay of a trace with a negative `new` ended in `internal error ... KeyError: (0, 1)`
    trace = write(tmp_path, HEADER + rows, "t.csv")
    code, out, err = run_cli(capsys, "oracle", "replay", trace, *REPLAY)
    assert code == 1 and out == "" and "internal error" not in err
    assert err.startswith(f"{trace}:{line}:{col}: error: {message.split(': it is')[0]}"), err  # (REPLAY_CELLS)


@pytest.mark.parametrize("rows, line, col, message", TRACE_CASES)
def test_a_bad_trace_cell_is_located_in_the_trace_and_at_the_programs_trace(capsys, tmp_path, monkeypatch,
                                                                             rows, line, col, message):
    monkeypatch.chdir(tmp_path)
    write(tmp_path, HEADER + rows, "t.csv")
    write(tmp_path, TRACE_PROGRAM)
    code, out, err = run_cli(capsys, "run", "prog.sq")
    assert code == 1 and out == ""
    assert err.startswith(f"t.csv:{line}:{col}: error: {message}"), err
    assert "  note: prog.sq:2:29: the program reads the trace here" in err


def test_the_replay_sends_no_empty_request(capsys, tmp_path):
    # vLLM refuses an empty prompt and max_tokens below 1: the replay's new and out are at least 1
    for rows, col, column in (("0,1,0,3,0,0\n", 5, "new"), ("0,1,5,0,0,0\n", 7, "out")):
        trace = write(tmp_path, HEADER + rows, "t.csv")
        code, out, err = run_cli(capsys, "oracle", "replay", trace, *REPLAY)
        assert code == 1 and err.startswith(f"{trace}:2:{col}: error: the trace's column `{column}` is 0"), err


def test_a_traces_rows_may_come_in_any_order(capsys, tmp_path):
    # the rows are sorted by session and turn (documented): turns out of order replay as in order
    in_order = write(tmp_path, HEADER + "0,1,5,3,1,0\n0,2,9,3,0,0\n1,1,4,2,0,0\n", "a.csv")
    shuffled = write(tmp_path, HEADER + "1,1,4,2,0,0\n0,2,9,3,0,0\n0,1,5,3,1,0\n", "b.csv")
    code, first, err = run_cli(capsys, "oracle", "replay", in_order, *REPLAY)
    assert code == 0, err
    code, second, err = run_cli(capsys, "oracle", "replay", shuffled, *REPLAY)
    assert code == 0 and second == first and len(first.splitlines()) == 4


@pytest.mark.parametrize("library, line, col, message", [
    ("stage s : fifo;\nlet x = ;\n", 2, 9, "expected "),                       # the parser's
    ("stage s : fifo;\nlet x = 1;\nlet x = 2;\n", 3, 5, "let `x` is declared twice"),  # the front end's
    ("stage s : fifo;\ngauge g = used(nopool);\n", 2, 16, "unknown pool `nopool`"),  # the linker's
])
def test_an_error_of_a_used_file_is_located_there_and_at_each_use_that_reads_it(capsys, tmp_path, monkeypatch,
                                                                                 library, line, col, message):
    # issue 23: a used file's error was located in that file only
    monkeypatch.chdir(tmp_path)
    write(tmp_path, library, "lib.sq")
    write(tmp_path, 'use "lib.sq";\n', "mid.sq")
    write(tmp_path, '// the program\nuse "mid.sq";\nworkload { arrive poisson(1); }\nsession { run s (1); }\n')
    code, out, err = run_cli(capsys, "check", "prog.sq")
    assert code == 1 and out == ""
    assert err.startswith(f"lib.sq:{line}:{col}: error: {message}"), err
    assert err.splitlines()[3:5] == ["  note: mid.sq:1:5: the program reads lib.sq here (`use`)",
                                     "  note: prog.sq:2:5: the program reads mid.sq here (`use`)"], err


# --------------------------------------------------------------------------
# No silent answer: samples that are not finite, a program that does nothing
# --------------------------------------------------------------------------


def test_a_report_says_how_many_samples_are_not_finite(capsys, tmp_path):
    # issue 23: `observe x = 1 / 0` in some samples reported a mean of inf and an interval of ±nan without a word
    path = write(tmp_path, "stage s : fifo;\nworkload { arrive poisson(1); }\n"
                           "session { run s (~exp(0.5)); observe x = serial - 3 * floor(serial / 3) == 0 ? 1 / 0 : 1;"
                           " observe y = 2; }\nrun { horizon 50; }\n")
    code, out, err = run_cli(capsys, "run", path)
    assert code == 0 and err == ""
    assert "note: observe x: 15 of its 45 samples are not finite (inf, -inf or nan), and its figures include them" \
        in out
    assert "observe y" not in out.split("note:", 1)[1]
    import json

    code, out, _ = run_cli(capsys, "run", path, "--json")
    observes = json.loads(out)["observes"]
    assert (observes["x"]["not_finite"], observes["y"]["not_finite"]) == (15, 0)


@pytest.mark.parametrize("text, kind", [("", "an empty program: nothing to run"),
                                        ("// only a comment\n", "an empty program: nothing to run"),
                                        ("pool kv { cap 10; }\nstage s : fifo;\n",
                                         "a library (no workload, no session): definitions only, nothing to run")])
def test_a_program_with_no_workload_and_no_session_says_so(capsys, tmp_path, text, kind):
    # issue 23: an empty program (or one with no workload) checked `OK` and ran 0 events without a word
    path = write(tmp_path, text)
    code, out, err = run_cli(capsys, "check", path)
    assert code == 0 and err == "" and out.rstrip().endswith(f"; {kind}"), out
    for command in (["run", path, "--horizon", "10"], ["trace", path, "--horizon", "10"]):
        code, out, err = run_cli(capsys, *command)
        assert code == 0 and err == (f"{path}: warning: the program has no workload and no session statements (an "
                                     "empty program, or a library of definitions that a program reads with `use`), "
                                     "so a run does nothing\n")
    code, out, err = run_cli(capsys, "check", write(tmp_path, SMALL, "small.sq"))
    assert code == 0 and out == "OK: 0 pool(s), 1 stage(s), 9 attribute(s), 3 block(s)\n"  # a program: no word


# --------------------------------------------------------------------------
# No false warning: a known one, not yet fixed
# --------------------------------------------------------------------------

KV_PER_TURN = """\
let turns = 4;
pool kv[turns] { cap 100000; block 16; evict lru; }
stage engine : step { budget 512; cost 0.01; }
stage tool : delay;
workload {
  arrive poisson(0.5);
  turn { set n = 1 + floor(~exp(200)); set o = 1 + floor(~exp(100)); }
}
session {
  turn;
  loop {
    hold kv[turn_no - 1] (n) {
      run engine prefill (n);
      run engine decode (o - 1);
    }
    branch (turn_no < turns) { run tool (~exp(2)); turn; } else { end; }
  }
}
run { horizon 100; }
"""


def test_a_kv_pool_per_turn_indexed_by_a_bounded_turn_number_gets_no_warning(capsys, tmp_path):
    # issue 23: the multi-turn agentic false warning, reproduced: a pool of KV per turn, the tool-call loop
    # bounded by the turn number; no run reaches turn_no = 5 at the hold, and the linker said "the index of
    # `kv[turn_no - 1]` can be 4 when `turn_no` = 5" (it forgot turn_no at the loop's head; link/loops.py)
    path = write(tmp_path, KV_PER_TURN)
    code, out, err = run_cli(capsys, "check", path)
    assert code == 0 and err == "", err
    code, out, err = run_cli(capsys, "run", path, "--horizon", "200")
    assert code == 0 and err == "", err  # and every run keeps the index in range


def test_a_loop_that_can_pass_its_family_is_still_warned_of(capsys, tmp_path):
    # the same loop one turn longer: turn_no reaches 5 at the hold, and the run stops there
    path = write(tmp_path, KV_PER_TURN.replace("turn_no < turns", "turn_no < turns + 1"))
    code, out, err = run_cli(capsys, "check", path)
    assert code == 0 and "warning: the index of `kv[turn_no - 1]` can be 4 when `turn_no` = 5" in err, err
    code, out, err = run_cli(capsys, "run", path, "--horizon", "200")
    assert code == 1 and "index 4 is out of range" in err, err


def test_a_while_over_tool_calls_with_a_kv_pool_per_turn_is_warned_of_only_one_turn_longer(capsys, tmp_path):
    # the agent with its loop a `while` (IR only): `while (turn_no <= 4)` keeps kv[turn_no - 1] in
    # kv[0..3] (test_diagnostics: no warning); `while (turn_no <= 5)` reaches kv[4], warned and the run stops
    import json

    program = json.loads((ROOT / "tests/programs/warnings/kv_per_turn_while.json").read_text(encoding="utf-8"))
    (loop,) = [stmt for stmt in program["blocks"][program["session"]] if isinstance(stmt, dict) and "While" in stmt]
    assert loop["While"][0] == {"Binary": ["Le", {"Attr": program["slot_turn"]}, {"Num": 4.0}]}
    loop["While"][0]["Binary"][2]["Num"] = 5.0
    path = write(tmp_path, json.dumps(program), "longer.json")
    code, _, err = run_cli(capsys, "check", path)
    assert code == 0 and "the index of `kv[turn_no - 1]` can be 4 when `turn_no` = 5" in err, err
    code, _, err = run_cli(capsys, "run", path, "--horizon", "300")
    assert code == 1 and "pool index 4 is out of range" in err, err


@pytest.mark.parametrize("guard, bound", [("turn_no < turns", 4.0), ("!(turn_no >= turns)", 4.0),
                                          ("turns > turn_no && ~bernoulli(0.5)", 4.0),
                                          # no guard bounds it, but `kv[turn_no - 1]` stops every run that
                                          # comes to it with turn_no 5 (a statement passed had no fault)
                                          ("~bernoulli(0.5)", 5.0)])
def test_a_loops_head_invariant_bounds_what_its_guards_bound(guard, bound):
    from semantics.link.loops import compute_loop_heads
    from semantics.link.ranges import compute_attribute_ranges
    from strategies import load_text

    program = load_text(KV_PER_TURN.replace("turn_no < turns", guard))
    heads = compute_loop_heads(program, compute_attribute_ranges(program), {})
    (head,) = heads.values()
    assert (head[program.slot_turn].low, head[program.slot_turn].high) == (1.0, bound)


KV_PER_TURN_COPY = (ROOT / "tests/programs/warnings/kv_per_turn_copy.sq").read_text(encoding="utf-8")


def test_a_guard_on_a_copy_of_the_turn_number_bounds_the_turn_number(capsys, tmp_path):
    # issue 23: `set calls = turn_no; set next = calls + 1; branch (next <= turns)` bounded next, and the
    # loop's head said nothing of turn_no ("the index of `kv[turn_no - 1]` can be 4 when `turn_no` = 5")
    path = write(tmp_path, KV_PER_TURN_COPY)
    code, out, err = run_cli(capsys, "check", path)
    assert code == 0 and err == "", err
    code, out, err = run_cli(capsys, "run", path, "--horizon", "200")
    assert code == 0 and err == "", err


@pytest.mark.parametrize("longer", ["next <= turns + 1", "calls < turns + 1", "next - 1 <= turns"])
def test_a_loop_bounded_through_a_copy_that_can_pass_its_family_is_still_warned_of(capsys, tmp_path, longer):
    # one turn longer, through the copy: turn_no reaches 5 at the hold, and the run stops there
    path = write(tmp_path, KV_PER_TURN_COPY.replace("next <= turns", longer))
    code, out, err = run_cli(capsys, "check", path)
    assert code == 0 and "warning: the index of `kv[turn_no - 1]` can be 4 when `turn_no` = 5" in err, err
    code, out, err = run_cli(capsys, "run", path, "--horizon", "200")
    assert code == 1 and "index 4 is out of range" in err, err


@pytest.mark.parametrize("statements, bound", [
    ("set calls = turn_no; branch (calls < turns)", 4.0),  # a copy
    ("set calls = turn_no; branch (turns > calls)", 4.0),
    ("set a = turn_no; set calls = a; set a = 0; branch (calls < turns)", 4.0),  # a copy of a copy outlives it
    ("set next = turn_no + 1; branch (next <= turns)", 4.0),  # a difference by a constant
    ("set back = turn_no - 2; branch (back < turns - 2)", 4.0),
    ("set next = turn_no + 0.5; branch (next < turns)", 4.0),  # whole turn_no <= 3.5
    ("set t = turn_no - 1; branch (t + 1 < turns)", 4.0),  # a guard on a sum with a constant narrows its term
    ("set t = turn_no - 1; branch (turns > 1 + t)", 4.0),
    ("set t = turn_no - 1; branch (t + 1 < turns + 1)", 5.0),
    # an assignment of either side ends a relation: calls + 1 is related to nothing (not tracked); after a
    # turn calls is turn_no - 1 (a turn shifts the relation: badin4), so turn_no goes to 5 (this loop is
    # warned of, truly: kv[4] at the hold); where no guard bounds turn_no, the hold's `kv[turn_no - 1]` does:
    # a run that comes to it with turn_no 5 stops there, so no head sees 6 (badin5: a statement passed had no
    # fault)
    ("set calls = turn_no; set calls = calls + 1; branch (calls < turns)", 5.0),
    ("set calls = turn_no; turn; branch (calls < turns)", 5.0),
    ("set calls = 2 - turn_no; branch (calls > 0)", 5.0),  # not a sum with a constant: not tracked
])
def test_a_guard_on_a_related_attribute_narrows_the_loops_head(statements, bound):
    from semantics.link.loops import compute_loop_heads
    from semantics.link.ranges import compute_attribute_ranges
    from strategies import load_text

    program = load_text(KV_PER_TURN.replace("branch (turn_no < turns)", statements))
    (head,) = compute_loop_heads(program, compute_attribute_ranges(program), {}).values()
    assert (head[program.slot_turn].low, head[program.slot_turn].high) == (1.0, bound)


@settings(max_examples=200, deadline=None)
@given(y=st.floats(allow_nan=False, allow_infinity=False), c=st.floats(allow_nan=False, allow_infinity=False),
       bound=st.floats(allow_nan=False))
def test_a_bound_through_a_relation_holds_whatever_the_rounding(y, c, bound):
    """x = y + c as a float sum: a bound on x gives one on y (loops.solve_high, solve_low) that every y
    whose sum is within it meets, though the sum rounds (y = 2**53, c = 1 is y again)."""
    from semantics.link.loops import solve_high, solve_low

    x = y + c
    if x <= bound:
        assert y <= solve_high(bound, c)
    if x >= bound:
        assert y >= solve_low(bound, c)


# The digest corpus's false warnings, a class each (tests/digest/warnings.json names the programs).

def warnings_of(capsys, path, *options):
    code, _, err = run_cli(capsys, "check", path, *options)
    assert code == 0, err
    return [line.split(": warning: ")[1] for line in err.splitlines() if ": warning: " in line]


RECOMPUTING = """\
pool mem { cap 10; preempt lifo; }
stage gpu : ps(2);
workload { arrive closed(2); }
session {
  set u = 1;
  hold mem (u - computed) {
    observe c0 = computed;
    grow mem (3);
    load mem (max(0, 3 - computed));
    run gpu (~exp(1));
    grow mem (2);
    run gpu (1);
  }
}
run { horizon 50; seed 5; }
"""


@pytest.mark.parametrize("change, warns", [
    ("    load mem (max(0, 3 - computed));\n", False),  # no load: every preemption is at position 0
    (None, True),  # a load moves the position: c0 is 3 at a re-admission, and the units 1 - 3
])
def test_computed_is_0_where_no_hold_can_have_computed_anything(capsys, tmp_path, change, warns):
    # issue 23: thirteen of the digest corpus's programs (r000-preempt ...) were warned that `hold mem (u -
    # computed)` can be negative "when `computed` = 3", where no hold's position ever leaves 0
    text = RECOMPUTING if change is None else RECOMPUTING.replace(change, "")
    path = write(tmp_path, text)
    found = warnings_of(capsys, path)
    code, out, err = run_cli(capsys, "run", path, "--json")
    import json

    c0 = json.loads(out)["observes"]["c0"]
    if warns:  # true: the run re-admits a hold with computed 3 (its p99), so the units are 1 - 3
        assert found == ["the units of the hold on `mem` can be negative: -1 when `u` = 1, `computed` = 2"]
        assert c0["p99"] == 3.0
    else:
        assert found == [] and c0["count"] > 0 and c0["mean"] == 0.0 and c0["p99"] == 0.0


@pytest.mark.parametrize("session, moves", [
    ("hold mem (1) { run gpu (1); }", False),
    ("hold mem (1) { run gpu (1); } cache (1)", False),  # one hold with a cache clause: never admitted again
    ("branch with (0.5) { hold mem (1) { run gpu (1); } cache (1) } else { hold mem (2) { run gpu (1); } }", False),
    ("hold mem (1) { load mem (1); }", True),  # a load advances the position
    ("hold mem (1) { run eng decode (1) growing mem; }", True),  # so do a growing run's tokens
    ("loop { hold mem (1) { run gpu (1); } cache (1) branch with (0.5) { end; } }", True),  # consumes its own
    ("hold mem (1) { run gpu (1); } cache (1)\n  hold mem (1) { run gpu (1); } cache (1)", True),  # the second
    ("hold mem (1) { hold mem (1) { run gpu (1); } cache (1) }", True),  # the outer's re-admission reaches it again
    ("hold mem (1) { release mem; run gpu (1); } cache (1)", True),  # a release caches, a re-admission consumes
])
def test_which_programs_can_compute_something(session, moves):
    from semantics.link.ranges import can_compute
    from strategies import load_text

    program = load_text("pool mem { cap 10; preempt lifo; }\nstage gpu : delay;\n"
                        "stage eng : step { budget 8; cost 1; memory mem; }\n"
                        f"workload {{ arrive batch(2); }}\nsession {{\n  {session}\n}}\nrun {{ horizon 1; }}\n")
    assert can_compute(program) is moves


@pytest.mark.parametrize("arrival, options, warns", [
    ("arrive batch(1);", (), False),  # r109-run-error, r382-run-error: one session, serial 0
    ("arrive batch(2);", (), True),
    ("arrive poisson(1);", ("--arrivals", "1"), False),
    ("arrive poisson(1);", ("--arrivals", "2"), True),  # the command line's limit is the run's
    ("arrive closed(1);", (), True),  # a closed workload replaces the session that ends: serial 1 next
])
def test_serial_is_below_the_number_of_sessions_the_workload_starts(capsys, tmp_path, arrival, options, warns):
    path = write(tmp_path, f"stage gpu[2] : fifo;\nworkload {{ {arrival} }}\n"
                           "session {\n  set k = serial + 1;\n  run gpu[k] (1);\n  end;\n}\nrun { horizon 10; }\n")
    expected = ["the index of `gpu[k]` can be 2 when `k` = 2, which is not a member index 0..1"] if warns else []
    assert warnings_of(capsys, path, *options) == expected
    code, _, err = run_cli(capsys, "run", path, *options)
    assert (code, "stage index 2 is out of range" in err) == ((1, True) if warns else (0, False)), err


@pytest.mark.parametrize("statements, warns", [
    ("set b = ~uniform(0, 2); set a = b ^ 2;", False),  # r247-general, r259-general, r397-general
    ("set b = ~uniform(0, 2); set a = pow(b, 3);", False),  # a base at least 0
    ("set b = ~uniform(-1, 1); set a = b ^ 2;", False),  # an even exponent
    ("set b = ~uniform(-1, 1); set a = b ^ 3;", True),  # (-1)^3 is -1
    ("set b = ~uniform(-2, 2); set a = b ^ ~bernoulli(0.5);", True),  # b^1 is b
    ("set b = min(~uniform(0, 2), 0) * -1; set a = b ^ -1;", True),  # b is -0, and (-0)^-1 is -inf
    ("set b = ~uniform(0.5, 2); set a = b ^ ~uniform(-1, 1);", False),  # a base above 0
])
def test_a_power_that_cannot_be_negative_is_not_read_as_any_number(capsys, tmp_path, statements, warns):
    path = write(tmp_path, "pool kv { cap 100; }\nstage g : delay;\nworkload { arrive batch(1); }\n"
                           f"session {{\n  {statements}\n  hold kv (1) {{ grow kv (a); run g (1); }}\n}}\n")
    found = warnings_of(capsys, path)
    assert (len(found) == 1 and found[0].startswith("the amount of `grow kv` can be negative")) if warns else \
        found == [], found


@settings(max_examples=300, deadline=None)
@example(low=0.0, width=0.0, y_low=-1.0, y_width=0.0, u=0.0, v=0.0, whole=True)  # (-0)^-1 is -inf
@given(low=st.floats(-10, 10), width=st.floats(0, 10), y_low=st.floats(-4, 4), y_width=st.floats(0, 4),
       u=st.floats(0, 1), v=st.floats(0, 1), whole=st.booleans())
def test_a_powers_range_holds_its_every_value(low, width, y_low, y_width, u, v, whole):
    """ranges.evaluate_power over two intervals holds the run's power (semantics/arithmetic.power) of every
    pair of values in them (NaN aside: the ranges do not model it); -0 is in an interval from 0."""
    import math

    from semantics import arithmetic
    from semantics.link.ranges import Interval, evaluate_power

    if whole:
        y_low, y_width = float(round(y_low)), 0.0
    a, b = Interval(low, low + width, False), Interval(y_low, y_low + y_width, False)
    x, y = low + u * width, y_low + v * y_width
    for base in ([x, -0.0] if low <= 0 <= low + width else [x]):
        value = arithmetic.power(base, y)
        r = evaluate_power(a, b)
        assert math.isnan(value) or r.low <= value <= r.high, (a, b, base, y, value, r)


# Found by tests/test_warning_property.py: what a path knows of turn_no, of the statements it passed, and
# of a `branch with` whose probability is 0 or 1 on it.

@pytest.mark.parametrize("session, found", [
    ("run h[turn_no + 1] (1);", []),  # a session arrives with turn_no 0
    ("turn;\n  turn;\n  run h[turn_no - 1] (1);", []),  # each turn adds 1: h[1]
    ("turn;\n  turn;\n  run h[turn_no] (1);", ["error: the index of `h[turn_no]` is never a member index 0..1 (e.g. 2)"]),
    # a run that goes on past a statement found its index a member there: the second is not warned of again
    ("set x = serial;\n  run h[x] (1);\n  run h[x] (1);",
     ["warning: the index of `h[x]` can be 2 when `x` = 2, which is not a member index 0..1"]),
    # ~bernoulli(p) is 1 only if p > 0: a branch taken only when x > 5 is never taken
    ("set x = serial;\n  branch with (x > 5) { run h[x] (1); }", []),
    ("set x = serial;\n  branch with (x > 0) { run h[x] (1); }",
     ["warning: the index of `h[x]` can be 2 when `x` = 2, which is not a member index 0..1"]),
])
def test_a_path_knows_the_turn_number_the_statements_passed_and_a_certain_branch_with(capsys, tmp_path, session,
                                                                                      found):
    path = write(tmp_path, "stage h[2] : delay;\nworkload { arrive batch(3); }\n"
                           f"session {{\n  {session}\n}}\nrun {{ horizon 10; }}\n")
    code, _, err = run_cli(capsys, "check", path)
    said = [line.split(": ", 1)[1] for line in err.splitlines() if ": warning: " in line or ": error: " in line]
    assert [line.split(" (e.g.")[0] + (" (e.g. 2)" if "(e.g. 2" in line else "") for line in said] == found, err


@settings(max_examples=15, deadline=None)
@given(generated_program=generated())
def test_a_generated_program_that_runs_gets_no_warning_but_a_true_one(generated_program):
    """Issue 23, "No false warning", over the property strategies' programs (tests/strategies.py): one that
    loads and runs without a run-time error gets no range warning (400 programs tried once, none had one),
    and the one warning it may get, that it starts no session, is true of its run."""
    import os
    import tempfile

    from semantics.errors import ProgramError, RunError
    from semantics.pipeline import load
    from semantics.smallstep.driver import run

    with tempfile.TemporaryDirectory() as directory:
        path = os.path.join(directory, "generated.sq")
        with open(path, "w", encoding="utf-8") as f:
            f.write(generated_program.text)
        try:
            loaded = load(path, command="run")
        except ProgramError:
            return  # refused: no warning to judge
        try:
            result = run(loaded.program, base_dir=directory)
        except RunError:
            return
    for warning in loaded.warnings:
        assert "starts no session" in warning.message, (generated_program.text, warning.message)
        assert result.arrivals == 0


# --------------------------------------------------------------------------
# One error must not hide another
# --------------------------------------------------------------------------

TWO_KINDS = """\
pool kv {{ cap 100; }}
stage srv : fifo;
stage eng : step {{ budget 8; cost 1; }}
stage fam[2] : fifo;
gauge busy = queue(srv);
workload {{ arrive poisson(0.5);{trace} }}
session {{
"""
#: the line of the session's first statement
FIRST_LINE = 8

#: An error in one statement, by the pass that finds it, and what its message says; {k} is the statement's
#: own number, so that two of one kind are two errors of their own.
STATEMENT_ERRORS = {
    "unknown name (front end)": ("set a{k} = unknown{k} + 1;", "unknown name `unknown{k}`"),
    "unknown stage (front end)": ("run srvx{k} (1);", "unknown stage `srvx{k}`"),
    "unknown pool (front end)": ("hold nopool{k} (1) {{ run srv (1); }}", "unknown pool `nopool{k}`"),
    "a built-in assigned (lowering)": ("set serial = {k};", "a built-in attribute the semantics sets"),
    "a context variable out of place (link)": ("set c{k} = tokens;", "`tokens` is read in a session statement"),
    "a step stage without a mode (link)": ("run eng ({k});", "needs a mode"),
    "a guard that is no test (link)": ("branch (0.5) {{ run srv ({k}); }}", "is not a test"),
    "a probability above 1 (link)": ("branch with (1.{k}) {{ run srv (1); }} else {{ end; }}",
                                     "~bernoulli's probability is 1.{k}"),
    # the verdicts' (Z3's): a fault in every run that comes to the statement (badin5: an earlier one had
    # made every later statement unreachable, and a statement the lowering refused was an `end;` to them)
    "an index never a member (verdict)": ("run fam[serial + {k} + 1] (1);", "is never a member index 0..1"),
    "a hold always negative (verdict)": ("hold kv (-{k} - serial) {{ run srv (1); }}",
                                         "is negative for every admissible value"),
    "a guard never 0 or 1 (verdict)": ("branch (serial + {k} + 1) {{ run srv (1); }}", "is never 0 or 1"),
}
#: a trace file with an error (its line 3), beside the program's
BAD_TRACE = "session,turn,new,out,think,forced\n0,1,20,4,1.5,0\n0,2,-3,4,1.0,0\n"
CORRECT = "run srv (~exp(1));"


@settings(max_examples=30, deadline=None)
@given(kinds=st.lists(st.sampled_from(sorted(STATEMENT_ERRORS)), min_size=2, max_size=2),
       slots=st.lists(st.integers(0, 4), min_size=2, max_size=2, unique=True), trace=st.booleans())
def test_two_independent_errors_in_different_statements_are_both_reported(kinds, slots, trace):
    """Issue 23: a program with an unknown context variable in a `set` and an unknown pool in a gauge reported
    only the pool (the front end's errors stopped before the linker). For every pair of errors of the kinds
    above (the front end's, the lowering's, the linker's checks, the verdicts') in two of five statements, the
    others correct, both are reported, each at its statement's line, and nothing else; with ``trace``, the
    program reads a trace file with an error too, which is reported beside them, located in the file."""
    import os
    import tempfile

    from semantics.errors import ProgramError
    from semantics.pipeline import load

    statements = [CORRECT] * 5
    for k, (kind, slot) in enumerate(zip(kinds, slots), start=1):
        statements[slot] = STATEMENT_ERRORS[kind][0].format(k=k)
    text = TWO_KINDS.format(trace=' trace "t.csv";' if trace else "") + "".join(f"  {s}\n" for s in statements) \
        + "}\nrun { horizon 10; }\n"
    with tempfile.TemporaryDirectory() as directory:
        path = os.path.join(directory, "prog.sq")
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
        with open(os.path.join(directory, "t.csv"), "w", encoding="utf-8") as f:
            f.write(BAD_TRACE)
        with pytest.raises(ProgramError) as caught:
            load(path)
    errors = getattr(caught.value, "errors", (caught.value,))
    expected = sorted(("prog.sq", FIRST_LINE + slot, STATEMENT_ERRORS[kind][1].format(k=k))
                      for k, (kind, slot) in enumerate(zip(kinds, slots), start=1))
    if trace:
        expected.append(("t.csv", 3, "the trace's column `new` is -3"))
    found = sorted((os.path.basename(e.span.file), e.span.line, e.message) for e in errors)
    assert len(found) == len(expected), (text, found)
    for (file, line, fragment), (found_file, found_line, message) in zip(expected, found):
        assert (found_file, found_line) == (file, line) and fragment in message, (text, found)
    if trace:  # the trace's error also names the program's `trace`
        (error,) = [e for e in errors if e.span.file.endswith("t.csv")]
        assert error.notes == (f"{path}:6:33: the program reads the trace here",), error.notes


def test_an_unknown_context_variable_and_an_unknown_pool_in_a_gauge_are_both_reported(capsys, tmp_path):
    # the program
    path = write(tmp_path, "stage s : fifo;\nworkload { arrive poisson(1); }\nsession { set x = tokens; run s (1); }\n"
                           "gauge g = used(nopool);\nrun { horizon 5; }\n")
    code, out, err = run_cli(capsys, "check", path)
    assert code == 1 and out == ""
    assert f"{path}:3:11: error: `tokens` is read in a session statement" in err
    assert f"{path}:4:16: error: unknown pool `nopool`" in err and err.endswith("2 errors\n")


@pytest.mark.parametrize("assignment", ["set a = pow(1, 2);", "set a = ln(1 + a);", "set a = ln(2 + 2 * a);"])
def test_a_function_z3_does_not_model_keeps_its_range(capsys, tmp_path, assignment):
    # issue 23 (the digest corpus's r119, r123, r157): `set a = pow(1, 2)` was any number to the linker, and a
    # hold of `a + 1` was warned of "can be negative: -1 when `a` = -2"; ln of a non-negative number + 1 too
    path = write(tmp_path, "pool kv { cap 8; }\nstage g : delay;\nworkload { arrive batch(2); init { set a = 0; } }\n"
                           f"session {{\n  {assignment}\n  hold kv (a + 1) {{ run g (1); }}\n}}\n")
    code, out, err = run_cli(capsys, "check", path)
    assert code == 0 and err == "", err
    code, out, err = run_cli(capsys, "check", write(tmp_path, open(path).read().replace("a + 1", "a - 2"), "b.sq"))
    assert "the units of the hold on `kv`" in err and "negative" in err  # a true finding stays


@pytest.mark.parametrize("text", [
    # ln(0) is -inf: a range endpoint Z3 cannot take as a bound
    "pool kv { cap 8; }\nstage g : delay;\nworkload { arrive batch(1); }\n"
    "session { set a = ln(0); hold kv (a + 1) { run g (1); } }\nrun { horizon 5; }\n",
    # a witness beyond a float's range (found by tests/test_run_fuzz.py once the linker went on after a
    # statement assigning a built-in): its value by its power of ten
    "pool kv { cap 1e308; block 3; evict lru; }\npool mem[2] { cap 1000; evict lru; preempt none; }\n"
    "stage gpu[2] : ps(1);\nworkload { arrive batch(1); }\n"
    "session { set a = inf; set b = now; hold kv (abs(10)) { run gpu[1] (now); } cache (exp(10)) "
    "hold mem[1] (-now) { hold kv ((now / a)) { turn; } cache ((now ? serial : serial)) lease kv (0) } "
    "set turn_no = ~erlang(3, 1); }\nrun { horizon 20; seed 1; }\n",
    # a power by an infinite exponent: no product of its base (found by tests/test_run_fuzz.py)
    "stage gpu : fifo;\nworkload { arrive poisson(1); }\nsession { run gpu ((now ^ -inf)); }\n"
    "run { horizon 20; seed 0; }\n",
])
def test_the_linker_answers_extreme_values_without_an_internal_error(capsys, tmp_path, text):
    code, out, err = run_cli(capsys, "check", write(tmp_path, text))
    assert code in (0, 1) and "internal error" not in err, err


# --------------------------------------------------------------------------
# No false warning outside the strict fragment (issue 23, badin4): what a path forgot after a branch, a
# hold or a power, a class each; tests/test_warning_property.py's generated programs found them
# --------------------------------------------------------------------------

FORGETTING = "pool mem {{ cap 100;{preempt} }}\nstage g : delay;\nstage h[2] : delay;\n" \
             "workload {{ arrive batch(4); }}\nsession {{\n{body}\n}}\nrun {{ horizon 100; }}\n"


@pytest.mark.parametrize("body, preempt, warns", [
    # the header of a hold no preemption can start again reads the value from before the hold, not one
    # its body assigns: x is 0 at `hold mem (x)` in every run
    ("  set x = 0;\n  hold mem (x) {\n    set x = -1;\n    run g (1);\n  }", "", False),
    # ... and inside a hold on such a pool, a hold within it too
    ("  set x = 0;\n  hold mem (1) {\n    hold mem (x) {\n      set x = -1;\n    }\n  }", "", False),
    # a pool that preempts: its holder's header is read again after its body set x to -1
    ("  set x = 0;\n  hold mem (x) {\n    set x = -1;\n    grow mem (200);\n  }", " preempt lifo;", True),
])
def test_a_hold_no_preemption_can_start_again_keeps_what_its_header_reads(capsys, tmp_path, body, preempt, warns):
    path = write(tmp_path, FORGETTING.format(preempt=preempt, body=body))
    found = warnings_of(capsys, path)
    assert (len(found) == 1 and "can be negative: -1" in found[0]) if warns else found == [], found


@pytest.mark.parametrize("body, warns", [
    # a branch passed is one of its blocks: serial 2 and 3 keep z = serial - 1 (the first block does not
    # touch z), serials 0 and 1 set z to 0; after it z <= 0 only for serials 0 and 1
    ("  set z = serial - 1;\n  branch (serial > 1) {\n    run g (1);\n  } else {\n    set z = 0;\n  }\n"
     "  branch (z <= 0) {\n    run h[serial] (1);\n  }", False),
    # the same with the first block's z one more: serial 2's z is 2 - 1 = 1, serial 1's 0: h[serial] of
    # 0 and 1 still, and serial 3's z is 2: no run reaches h[2]
    ("  set z = serial - 1;\n  branch (serial > 1) {\n    set z = z;\n  } else {\n    set z = 0;\n  }\n"
     "  branch (z <= 1) {\n    run h[serial - 1] (1);\n  }", True),  # serial 0: h[-1], a true warning
    # a block that ends the session: the path goes on only through the other
    ("  branch (serial > 1) {\n    end;\n  } else {\n    set z = serial;\n  }\n  run h[z] (1);", False),
    # a hold passed: its body's values after it (y is 2 in every run that passes the hold)
    ("  set y = 5;\n  hold mem (1) {\n    set y = 2;\n  }\n  run h[y - 2] (1);", False),
    ("  hold mem (1) {\n    set y = serial;\n  }\n  run h[y - 2] (1);", True),  # serials 0 and 1: h[-2], h[-1]
])
def test_a_branch_or_hold_passed_is_the_run_of_its_blocks(capsys, tmp_path, body, warns):
    path = write(tmp_path, FORGETTING.format(preempt="", body=body))
    found = warnings_of(capsys, path)
    assert (len(found) == 1 and found[0].startswith("the index of")) if warns else found == [], found
    code, _, err = run_cli(capsys, "run", path)
    assert (code == 1 and "out of range" in err) == warns, err  # the warning is true: the run stops there


@pytest.mark.parametrize("index, warns", [
    ("pow(next - 2, 2)", False),  # next is 1 before the first turn: (-1)^2 = 1
    ("(next - 2) ^ 2", False),
    ("pow(next - 3, 2)", True),  # 4: no member of h[2]
    ("pow(next - 2, 3)", True),  # -1
])
def test_a_power_by_a_small_whole_exponent_is_a_product(capsys, tmp_path, index, warns):
    path = write(tmp_path, FORGETTING.format(preempt="", body=f"  set next = turn_no + 1;\n  run h[{index}] (1);"))
    found = warnings_of(capsys, path) if not warns else None
    if not warns:
        assert found == [], found
        return
    code, _, err = run_cli(capsys, "check", path)  # every run reaches it with the bad value: an error
    assert code == 1 and "is never a member index 0..1" in err, err


def test_a_turn_shifts_a_relation_with_the_turn_number():
    """`set next = turn_no + 1; turn;` leaves next = turn_no, and so does the loop's body: the loop's head
    keeps the relation both sides have (it had been dropped at every `turn;`)."""
    from semantics.link.loops import compute_loop_heads
    from semantics.link.ranges import compute_attribute_ranges
    from strategies import load_text

    program = load_text("stage g : delay;\nstage h[1] : delay;\nworkload { arrive batch(2); }\nsession {\n"
                        "  set next = turn_no + 1;\n  turn;\n  loop {\n    run h[turn_no - next] (1);\n"
                        "    set next = turn_no + 1;\n    branch (next <= 3) { turn; } else { end; }\n  }\n}\n"
                        "run { horizon 10; }\n")
    (head,) = compute_loop_heads(program, compute_attribute_ranges(program), {}).values()
    next_slot = program.attrs.index("next")
    assert (next_slot, program.slot_turn, 0.0) in head.relations
    assert (head[program.slot_turn].low, head[program.slot_turn].high) == (1.0, 3.0)


#: a loop of three turns whose index is 2 * turn_no through an attribute (docs/campaigns.md, warnings 1/527)
WHOLE_ON_THE_PATH = """pool mem {{ cap 1000000; }}
stage h[4] : delay;
workload {{ arrive batch(2); }}
session {{
  set z = {before};
  turn;
  loop {{
    set z = turn_no;
    run h[{index}] (1);
    set next = turn_no + 1;
    branch (next <= 3) {{ turn; }} else {{ end; }}
  }}
}}
run {{ horizon 1000; }}
"""


@pytest.mark.parametrize("before, index", [
    ("0", "z + z"), ("0", "z * 2"), ("0", "pow(z, 2)"),
    ("0.5", "z + z"),  # z not whole in its range, whole on the path: Z3 could not decide Not(IsInt(z + z))
])
def test_a_fault_z3_cannot_decide_as_a_whole_disjunction_is_warned_of(capsys, tmp_path, before, index):
    """Z3 gives up on `Not(IsInt(z + z))` of a whole z, and an unknown is no finding: the index question's
    disjunction asked whole was unknown and the fault 4 at turn 2 went unwarned; asked part by part, it is
    found (semantics/link/solver.py decide)."""
    path = write(tmp_path, WHOLE_ON_THE_PATH.format(before=before, index=index))
    found = warnings_of(capsys, path)
    assert len(found) == 1 and found[0].startswith(f"the index of `h[{index}]` can be"), found
    code, _, err = run_cli(capsys, "run", path)
    assert code == 1 and "stage index 4 is out of range" in err, err  # the warning is true


# --------------------------------------------------------------------------
# No false warning: the three classes a second sample still showed (issue 23, badin5; docs/campaigns.md,
# "Warnings exactly where a run reaches a fault"), a test each
# --------------------------------------------------------------------------

LOOPING = "pool mem {{ cap 100; }}\nstage g : delay;\nstage h[2] : delay;\nworkload {{ arrive batch(4); }}\n" \
          "session {{\n  set x = 0;\n  loop {{\n{body}\n    turn;\n    branch (turn_no > 5) {{ end; }}\n  }}\n}}\n" \
          "run {{ horizon 100; }}\n"


@pytest.mark.parametrize("body, warns, stops", [
    # the second iteration's guard is 2 in every run, which stops there: no run reaches h[floor(turn_no / 2)]
    # with turn_no 4 (a later iteration starts where an earlier one passed its whole body; the head's
    # interval of turn_no, 0 to 5, alone had it)
    ("    run h[floor(turn_no / 2)] (1);\n    branch (turn_no * 2) { run g (1); } else { run g (2); }",
     ["the guard of this branch can be 2"], "the branch guard is 2"),
    # a guard that passes: turn_no 4 reaches h[2], truly
    ("    run h[floor(turn_no / 2)] (1);\n    branch (turn_no < 9) { run g (1); } else { run g (2); }",
     ["the index of `h[floor(turn_no / 2)]` can be 2"], "stage index 2 is out of range"),
])
def test_a_later_iteration_starts_where_an_earlier_one_passed_its_body(capsys, tmp_path, body, warns, stops):
    path = write(tmp_path, LOOPING.format(body=body))
    found = warnings_of(capsys, path)
    assert len(found) == len(warns) and all(f.startswith(w) for f, w in zip(found, warns)), found
    code, _, err = run_cli(capsys, "run", path)
    assert code == 1 and stops in err, err  # each warning is true: the run stops there


@pytest.mark.parametrize("body, warns", [
    # x is 0 or 0.5 at the loop's head (loops.State.values), never 0.25, which its interval [0, 0.5] has
    ("    branch (x * 2) { run g (1); } else { run g (2); }\n"
     "    branch (serial == 1) { set x = 0.5; } else { set x = 0; }", False),
    ("    branch (x * 2) { run g (1); } else { run g (2); }\n"
     "    branch (serial == 1) { set x = 0.25; } else { set x = 0; }", True),  # serial 1: 0.5, truly
])
def test_a_loops_head_knows_the_few_values_an_attribute_takes(capsys, tmp_path, body, warns):
    from semantics.link.loops import compute_loop_heads
    from semantics.link.ranges import compute_attribute_ranges
    from strategies import load_text

    text = LOOPING.format(body=body)
    program = load_text(text)
    (head,) = compute_loop_heads(program, compute_attribute_ranges(program), {}).values()
    assert head.values_of(program.attrs.index("x")) == ({0.0, 0.25} if warns else {0.0, 0.5})
    found = warnings_of(capsys, write(tmp_path, text))
    assert (len(found) == 1 and found[0].startswith("the guard of this branch can be 0.5")) if warns else found == []
    code, _, err = run_cli(capsys, "run", write(tmp_path, text))
    assert (code == 1 and "the branch guard is 0.5" in err) if warns else code == 0, err


NOT_A_NUMBER = "pool mem {{ cap 100; }}\nstage g : delay;\nstage h[2] : delay;\nworkload {{ arrive batch(2); }}\n" \
               "session {{\n  set c = serial;\n{body}\n}}\nrun {{ horizon 100; }}\n"


@pytest.mark.parametrize("body, warns", [
    # c / c is NaN for serial 0, whose run stops at the guard (NaN is neither 0 nor 1); serial 1 passes it
    # with c = 1 and reaches h[0]: no run reaches h[-1] (0 / 0 had been any number, 0 or 1 among them)
    ("  branch (c / c) { run g (1); } else { run g (2); }\n  run h[c - 1] (1);",
     ["the guard of this branch can be NaN when `c` = 0"]),
    # NaN is not below 0: a hold of c / c - 1 is NaN or 0, never negative
    ("  hold mem (c / c - 1) {\n    grow mem (c / c - 1);\n    run g (1);\n  }", []),
    # a comparison with NaN is false (`!=` true) and never NaN: no run takes the first block (it had been
    # any number, 2 among them); min and max give the other operand
    ("  branch ((c / c) >= 2) { run h[c - 1] (1); } else { run h[c] (1); }", []),
    ("  branch ((c / c) != 1) { run h[c] (1); } else { run h[c - 1] (1); }", []),
    ("  run h[min(c / c, 0)] (1);", []),
    ("  run h[max(c / c, 0)] (1);", []),
    ("  run h[abs(c / c)] (1);", ["the index of `h[abs(c / c)]` can be NaN when `c` = 0"]),
])
def test_nan_is_neither_a_number_nor_any_number(capsys, tmp_path, body, warns):
    path = write(tmp_path, NOT_A_NUMBER.format(body=body))
    found = warnings_of(capsys, path)
    assert len(found) == len(warns) and all(f.startswith(w) for f, w in zip(found, warns)), found
    code, _, err = run_cli(capsys, "run", path)
    assert (code == 1 and "nan" in err) if warns else (code == 0 and err == ""), err


def test_a_loops_head_is_found_whatever_its_relations_do(capsys, tmp_path):
    """A program of the warning campaign (seed 2) whose loop head's iteration never ended: the relation y =
    calls came and went round after round (a statement passed narrows through it, and `h[y - 1]` faults for
    every value the first iteration has). After some rounds the head keeps only relations it had (loops.py),
    and the linker finds what every run does: each stops at h[-1] in the first iteration."""
    body = ("  set x = serial - 1;\n  set y = 0;\n  set z = 0;\n  set calls = turn_no;\n  set next = turn_no + 1;\n"
            "  set i = 0;\n  set y = max(z - (x), serial);\n  hold mem (x - 1) {\n    turn;\n  }\n  loop {\n"
            "    set y = calls;\n    set x = calls;\n    branch with ((serial) >= (3)) {\n      set z = 3;\n"
            "      run g (1);\n    } else {\n      hold mem (abs(min(next, y))) {\n        set z = 2;\n      }\n"
            "      set x = y;\n    }\n    run h[y - 1] (1);\n    run g (1);\n    set calls = turn_no;\n"
            "    branch (calls < 2) { turn; } else { end; }\n  }")
    path = write(tmp_path, "pool mem { cap 1000000; }\nstage g : delay;\nstage h[4] : delay;\n"
                           f"workload {{ arrive batch(3); }}\nsession {{\n{body}\n}}\nrun {{ horizon 1000; }}\n")
    code, _, err = run_cli(capsys, "check", path)
    assert code == 1 and ":28:5: error: the index of `h[y - 1]` is never a member index 0..3" in err, err
