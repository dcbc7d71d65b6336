"""The fast forms of semantics/fast/forms.py against their definitions,
where tests/test_smallstep_properties.py's programs do not reach them: the
exponential draw written out (rng.sample_exp), the Poisson arrival as one
update (fast/workload.poisson_arrival, and the driver's whole step at it,
poisson_arrival_step) with an arrival limit, settle's fast form with pools
dirty and a session made ready by another's end (closed workload), the
areas a step's fast form integrates (fast/measure.make_areas_at: checked with
the event taker in tests/test_smallstep_properties.py). The definition's
machine (with an observer, as a trace runs it) applies every definition; the
fast engine's applies the fast forms; every event must leave the same
configuration.
"""

from __future__ import annotations

import math
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from semantics.compiler import compile_source
from semantics import fast
from semantics.fast import fifo as fast_fifo
from semantics.fast import forms
from semantics.fast import settle as fast_settle
from semantics.fast import workload as fast_workload
from semantics.smallstep import settle, workload
from semantics.smallstep.driver import build_machine, walk
from semantics.smallstep.rng import draw_uniform, sample_exp


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 2**64 - 1), st.integers(0, 2**40), st.sampled_from([1.0, 0.5, 1.25, 1e-300, 3e7]))
def test_the_written_out_exponential_draw_is_the_definition(stream, position, mean):
    assert sample_exp(mean, stream, position).hex() == (-mean * math.log1p(-draw_uniform(stream, position))).hex()


def test_the_written_out_exponential_draw_near_one():
    """Positions whose uniform number is nearest 1 (the largest draws) too: the definition bit for bit."""
    rng = random.Random(8)
    streams = [rng.getrandbits(64) for _ in range(200)]
    for stream in streams:
        for position in range(50):
            assert sample_exp(2.0, stream, position) == -2.0 * math.log1p(-draw_uniform(stream, position))


def events(program, observed: bool) -> list:
    m = build_machine(program, observer=lambda rule, c, fields: None) if observed else fast.build_machine(program)
    return list(walk(m))


PROGRAMS = {
    "arrival limit": """stage s : fifo(1);
workload { arrive poisson(2); }
session { set t0 = now; run s (~exp(0.4)); observe w = now - t0; }
run { arrivals 40; seed 3; }""",
    "arrival limit, warm-up": """stage s : fifo(2);
workload { arrive poisson(3); }
session { run s (~exp(0.5)); observe w = now; }
run { arrivals 60; warmup 2; seed 9; }""",
    "init": """stage s : fifo(1);
workload { arrive poisson(1); init { set k = ~exp(1); } }
session { run s (k); observe w = now; }
run { horizon 30; seed 4; }""",
    "pool": """pool p { cap 6; }
stage s : fifo(1);
workload { arrive poisson(1.5); }
session { hold p (2) { run s (~exp(1)); } observe w = now; }
run { horizon 30; seed 5; }""",
    "closed": """stage s : fifo(2);
workload { arrive closed(5); }
session { run s (~exp(1)); observe w = now; }
run { horizon 30; seed 6; }""",
}


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_the_fast_forms_leave_the_definitions_configurations(name):
    program = compile_source(PROGRAMS[name], f"<{name}>")[0]
    unobserved = events(program, observed=False)
    assert len(unobserved) > 20
    assert events(program, observed=True) == unobserved


def test_the_fast_forms_are_installed():
    """The programs above do reach the fast forms (else the comparison would compare the definitions with themselves)."""
    plain = fast.build_machine(compile_source(PROGRAMS["arrival limit"], "<a>")[0])
    assert plain.event_rules["arrive"] is fast_workload.poisson_arrival
    assert plain.settle is forms.SETTLE is fast_settle.settle_fast
    assert plain.event_steps == {"arrive": fast_workload.poisson_arrival_step, "job": fast_fifo.complete_step}
    with_init = fast.build_machine(compile_source(PROGRAMS["init"], "<i>")[0])
    assert with_init.event_rules["arrive"] is workload.arrival_event
    for observer in (None, lambda *a: None):  # the definition's machine, traced or not, has no fast form
        definition = build_machine(compile_source(PROGRAMS["arrival limit"], "<a>")[0], observer=observer)
        assert definition.event_rules["arrive"] is workload.arrival_event and definition.settle is settle.settle
        assert definition.event_steps == {}
