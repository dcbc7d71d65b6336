"""Fast form of session/observe followed at once by session/end
(semantics/smallstep/sessions.py)."""

from __future__ import annotations

import math

from ..smallstep import workload
from ..smallstep.configuration import Configuration, Statistics
from .records import setter
from ..smallstep.sessions import check_turn_number, end_session, execute_observe

_set_left = setter(Configuration, "sessions", "statistics", "ended_attrs", "samples")
_set_ended = setter(Statistics, "ended")


def execute_observe_then_end(m, c, s, op, env):
    """Fast form (fast.py) of session/observe when session/end follows at
    once (the observe is the last statement of the session's block, or
    `end;` follows) and the session holds and leases nothing: the two rules
    as one update (at or after the warm-up, end_session's update written
    out here: a running session has no job, growth or pending hold)."""
    if not op.exprs[1] or s.holds or s.leases:  # (running, it has no job, growth or pending hold)
        return execute_observe(m, c, s, op, env)
    value = op.exprs[0](env)
    if c.time < m.warmup:
        return end_session(m, c, s, samples=c.samples)
    attrs = s.attrs
    turn = attrs[m.slot_turn]  # _with_sample, written out: this is once per session of most programs
    if not -math.inf < turn < math.inf:
        check_turn_number(c, s, m, op.at)
    serial = s.serial
    samples = ((op.stmt.index, c.time, serial, int(turn), value), c.samples)  # workload.record_sample
    # session/end, written out for a session that holds nothing, at or after the warm-up (end_session)
    stats = c.statistics
    c = _set_left(c, c.sessions.delete(serial), _set_ended(stats, stats.ended + 1),
                  c.ended_attrs.set(serial, attrs) if m.keeps_ended_attrs else c.ended_attrs, samples)
    return workload.replace_closed(m, c) if m.closed else c
