"""Fast forms of the arrival event under ``arrive poisson``
(semantics/smallstep/workload.py)."""

from __future__ import annotations

from ..smallstep.configuration import READY, Configuration, Session, Workload
from .chunks import insert_event
from .records import build, setter
from ..smallstep.machine import Machine
from ..smallstep.rng import member_stream, sample_exp
from ..smallstep.workload import arrival_event

_set_next_serial_generated = setter(Workload, "next_serial", "generated", "arrivals_draws")
_set_arrived = setter(Configuration, "workload", "sessions", "ready")
_set_arrived_scheduled = setter(Configuration, "workload", "sessions", "ready", "events", "sequence")


def arrival_rule(m: Machine):
    """The arrival event's rule for an unobserved run (fast.py): under
    ``arrive poisson`` with no init block and no trace, ``arrival_event`` and
    workload/arrive written out as one update (``poisson_arrival``); else
    ``arrival_event`` itself."""
    if m.poisson_gap is not None and not m.has_init and not m.trace_sessions:
        return poisson_arrival
    return arrival_event


def poisson_arrival(m: Machine, c: Configuration, _a: int = 0, _b: int = 0) -> Configuration:
    """Fast form (fast.py) of ``arrival_event`` under ``arrive poisson`` with
    no init block and no trace: the gap drawn (draw_gap), the next arrival
    scheduled, and workload/arrive's new session (its attributes blank but
    its serial, ready), as one update."""
    w, s, serial, generated, position = _poisson_session(m, c.workload, c.time)
    sequence = c.sequence
    ready = c.ready
    limit = m.program.arrivals
    if limit is None or generated < limit:
        key = (c.time + sample_exp(m.poisson_gap, m.stream_arrivals, position), sequence)
        return _set_arrived_scheduled(c, w, c.sessions.set(serial, s), (ready[0], (serial, ready[1])),
                                      insert_event(c.events, key, "arrive"), sequence + 1)
    return _set_arrived(c, w, c.sessions.set(serial, s), (ready[0], (serial, ready[1])))


def _poisson_session(m: Machine, w, now: float) -> tuple:
    """workload/arrive's new session under ``arrive poisson`` without init or
    trace, written out: its attributes blank but its serial, ready at ``now``;
    the workload counting it, and its serial, count and gap's draw position."""
    position = w.arrivals_draws
    generated = w.generated + 1
    serial = w.next_serial
    k = m.slot_serial
    attrs = m.blank_attrs
    s = build(Session, (serial, attrs[:k] + (float(serial),) + attrs[k + 1:], m.session_frames, 0, READY, (), (),
                        None, None, None, -1, (), -1, member_stream(m.stream_sessions, serial), 0, -1, 0,
                        (now, 1)))
    return _set_next_serial_generated(w, serial + 1, generated, position + 1), s, serial, generated, position


def poisson_arrival_step(m: Machine, c: Configuration, _a: int = 0, _b: int = 0) -> Configuration:
    """Fast form (fast.EVENT_STEPS) of the driver's step at an arrival event
    under ``arrive poisson`` without init or trace: time/advance to it, the
    event taken off (take_first_event), ``poisson_arrival``, and settle, as
    one update of the configuration and a run of the new session (which
    settle, finding it the only ready one, runs first: settle.settle_ready)."""
    ready = c.ready
    if ready[0] is not None or ready[1] is not None:  # a ready session would run first (no walk leaves one)
        return m.settle(m, poisson_arrival(m, m.take_first_event(c), _a, _b))
    events = c.events
    now = events[0][0]
    w, s, serial, generated, position = _poisson_session(m, c.workload, now)
    sequence = c.sequence
    events = events[1:]
    limit = m.program.arrivals
    if limit is None or generated < limit:
        events = insert_event(events, (now + sample_exp(m.poisson_gap, m.stream_arrivals, position), sequence),
                              "arrive")
        sequence += 1
    c = _set_advanced_arrived(c, now, m.areas_at(c, now), c.taken + 1, w, c.sessions.set(serial, s), events, sequence)
    return m.settle_ready(m, c, serial)


_set_advanced_arrived = setter(Configuration, "time", "areas", "taken", "workload", "sessions", "events", "sequence")
