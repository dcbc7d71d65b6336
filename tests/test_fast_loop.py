"""The fast engine's own loop (semantics/fast/loop.py) against the definition:
programs of the loop's shape (fifo, delay and ps stages, an open, closed or batch
workload, set, observe, run, end, branch, loop, choose) give the same
RunResult on both engines, byte for byte, or the same RunError; and the loop
is what the fast engine ran them on (``applies``). The generated programs of
tests/test_engines_equal.py reach the loop rarely (pools, gauges and queries
take them elsewhere), so these are its own."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from semantics import fast
from semantics.compiler import compile_source
from semantics.errors import RunError
from semantics.fast import engine, loop
from semantics.smallstep import driver


def outcome(run, program) -> str:
    try:
        return repr(run(program))
    except RunError as e:
        return f"RunError {e.message!r} stmt={e.stmt!r} time={e.time!r}"


def both(text: str) -> str:
    """The outcome on both engines, asserted equal, the loop asserted to have run it."""
    program, _ = compile_source(text, "<test_fast_loop>")
    assert loop.applies(engine.build_machine(program)), text
    definition = outcome(driver.run, program)
    assert outcome(fast.run, program) == definition, text
    return definition


STAGES = ("fifo", "fifo(2)", "fifo(1e9)", "delay", "ps(1)", "ps(2)", "ps(min(present, 3))", "ps(0.5 + present / 4)")


@st.composite
def statements(draw, stages: int, depth: int) -> str:
    out = []
    for _ in range(draw(st.integers(1, 4))):
        s = f"s{draw(st.integers(0, stages - 1))}"
        choices = ["set x = now;", "set y = ~exp(1);", f"run {s} (~exp(0.5));", f"run {s} (y - 0.5);",
                   f"run {s} (0);", "observe o = now - x;", "observe t = y > 1;", "choose j in 2 by (~exp(1), -j);"]
        if depth > 0:
            choices += ["branch", "loop", "branch with"]
        pick = draw(st.sampled_from(choices))
        if pick == "branch with":
            pick = (f"branch with (0.4) {{ {draw(statements(stages, depth - 1))} }} "
                    f"else {{ {draw(statements(stages, depth - 1))} }}")
        elif pick == "branch":
            pick = f"branch (y > 1) {{ {draw(statements(stages, depth - 1))} }}"
        elif pick == "loop":
            pick = (f"set k = 0; loop {{ set k = k + 1; {draw(statements(stages, depth - 1))} run {s} (1); "
                    f"branch (k >= 2) {{ end; }} }}")
        out.append(pick)
    if depth == 1 and draw(st.integers(0, 5)) == 0:
        out.append("end;")
    return " ".join(out)


@st.composite
def loop_programs(draw) -> str:
    n = draw(st.integers(1, 3))
    stages = "".join(f"stage s{k} : {draw(st.sampled_from(STAGES))};\n" for k in range(n))
    arrival = draw(st.sampled_from(("poisson(1.2)", "poisson(0.4)", "closed(3)", "batch(40)", "renewal(~exp(1))",
                                    "renewal(0.5 + ~exp(0.5))")))
    body = draw(statements(n, 2))
    if arrival.startswith("closed") or draw(st.booleans()):
        body = f"loop {{ {body} run s0 (~exp(1)); }}" if arrival.startswith("closed") else body
    warmup = draw(st.sampled_from((0, 5)))
    limit = ""
    if arrival.startswith(("poisson", "renewal")) and draw(st.integers(0, 3)) == 0:
        limit = f" arrivals {draw(st.integers(1, 30))};"
    return (f"{stages}workload {{ arrive {arrival}; }}\nsession {{ set x = now; set y = 1; {body} observe "
            f"done = now - x; }}\nrun {{ horizon {draw(st.sampled_from((30, 60)))}; warmup {warmup}; "
            f"seed {draw(st.integers(1, 9))};{limit} }}\n")


@settings(max_examples=40, derandomize=True, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(loop_programs())
def test_the_loop_gives_the_definitions_result(text):
    both(text)


def test_the_mm1_queue_runs_on_the_loop():
    result = both("stage server : fifo(1);\nworkload { arrive poisson(0.8); }\nsession { set arrived = now; "
                  "run server (~exp(1)); observe sojourn = now - arrived; }\nrun { horizon 500; seed 1; }\n")
    assert "RunResult" in result and "sojourn" in result


@pytest.mark.parametrize("text, error", [
    # a job of inf or NaN work
    ("stage s : fifo;\nworkload { arrive poisson(1); }\nsession { set a = 1e308; run s (a * 10); }\n"
     "run { horizon 10; }\n", "the run's work is inf"),
    ("stage s : delay;\nworkload { arrive poisson(1); }\nsession { set a = 1e308; run s (a * 10 - a * 10); }\n"
     "run { horizon 10; }\n", "the run's work is NaN"),
    # the backstops: a session made ready too often at one instant, a closed workload replaced too often
    ("stage s : fifo;\nworkload { arrive renewal(1e12); }\nsession { loop { run s (1e-9); } }\n"
     "run { horizon 3e12; }\n", "became ready 1000 times at one instant"),
    ("stage s : fifo;\nworkload { arrive closed(1); }\nsession { run s (0); }\nrun { horizon 10; }\n",
     "arrive closed: 1000 sessions ended at one instant"),
    # run { arrivals N; }: too few by the horizon, not drained, drained within the warm-up
    ("stage s : fifo;\nworkload { arrive poisson(0.1); }\nsession { run s (1); }\n"
     "run { horizon 20; arrivals 50; }\n", "of the 50 arrivals came by the horizon"),
    ("stage s : fifo;\nworkload { arrive poisson(5); }\nsession { run s (1); }\n"
     "run { horizon 20; arrivals 50; }\n", "did not drain by the horizon"),
    ("stage s : delay;\nworkload { arrive poisson(5); }\nsession { run s (1); }\n"
     "run { horizon 200; warmup 100; arrivals 5; }\n", "at or before the warmup"),
    # a guard that is not a test (a local rule's error, raised on the loop's clock)
    ("stage s : fifo;\nworkload { arrive poisson(1); }\nsession { set y = ~exp(1); run s (1); branch (y) { } }\n"
     "run { horizon 10; }\n", "the branch guard is"),
])
def test_the_loop_raises_the_definitions_errors(text, error):
    assert error in both(text)


def test_programs_of_another_shape_are_not_the_loops():
    for text in ("pool p { cap 2; }\nstage s : fifo;\nworkload { arrive poisson(1); }\n"
                 "session { hold p (1) { run s (1); } }\nrun { horizon 10; }\n",
                 "stage s : ps(1);\nstage t : ps(1);\nworkload { arrive poisson(1); }\nsession { run s, t (1); }\n"
                 "run { horizon 10; }\n",
                 "stage s : fifo;\nworkload { arrive poisson(1); }\nsession { observe q = queue(s); run s (1); }\n"
                 "run { horizon 10; }\n",
                 "stage s : fifo;\ngauge g = queue(s);\nworkload { arrive poisson(1); }\nsession { run s (1); }\n"
                 "run { horizon 10; }\n"):
        program, _ = compile_source(text, "<test_fast_loop>")
        assert not loop.applies(engine.build_machine(program)), text
