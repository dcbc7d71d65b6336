"""time/advance and taking the first event off, written out as Python
source per program (semantics/smallstep/measure.py has the definition)."""

from __future__ import annotations

from ..smallstep.configuration import Configuration
from ..smallstep.machine import Machine
from ..smallstep.observables import holding_sessions, levels


#: each stage kind's ``level`` (stages/: fifo.level, ps.level, step.level) as a Python expression of the
#: stage's state record named ``state``; a kind not here (flows) has the program's levels read by
#: ``observables.levels``
LEVEL_SOURCES = {
    "fifo": lambda m, s, state: f"({state}.busy / {m.servers[s]!r})",
    "ps": lambda m, s, state: f"(1.0 if {state}.jobs else 0.0)",
    "delay": lambda m, s, state: f"(1.0 if {state}.jobs else 0.0)",  # a ps stage's: ps(present)
    "step": lambda m, s, state: f"(0.0 if {state}.iteration is None else 1.0)",
}


def make_event_taker(m: Machine):
    """``take_first_event`` written out as one function of ``m``'s program:
    the configuration unpacked once, each level one expression of its pools
    and stages, the new configuration built once (it runs at every event;
    the loop over the levels and its calls were 4 % of a run, and the
    separate update of the configuration another 2 %).
    tests/test_smallstep_properties.py checks it equals ``take_first_event``
    bit for bit. A program with flows reads its levels by ``levels`` itself."""
    fields = Configuration._fields
    lines = ["def take_first_event(c):",
             f"    {', '.join(fields)}, = c",
             "    t = events[0][0]"] + _integration_lines(m)
    changed = {"time": "t", "events": "events[1:]", "taken": "taken + 1"}
    lines.append(f"    return new(Configuration, ({', '.join(changed.get(f, f) for f in fields)},))")
    return _define(m, lines, "take_first_event")


def make_areas_at(m: Machine):
    """``areas_at(c, t)``: the areas ``take_first_event`` leaves when the
    first pending event is at ``t`` (``integrate(m, c, t)``), written out as
    make_event_taker's are, for the fast forms that take an event and apply
    its rule in one update (fast.EVENT_STEPS). tests/test_smallstep_fast.py
    checks it against take_first_event."""
    lines = ["def areas_at(c, t):",
             f"    {', '.join(Configuration._fields)}, = c"] + _integration_lines(m) + ["    return areas"]
    return _define(m, lines, "areas_at")


def _integration_lines(m: Machine) -> list[str]:
    """Python lines that set ``areas`` to the areas after time passes from
    ``time`` to ``t`` (integrate), with the configuration's fields unpacked
    into locals of their names."""
    fields = Configuration._fields
    assert {"time", "events", "areas", "taken", "pools", "stages", "sessions"} <= set(fields)
    if m.warmup > 0:
        interval = f"t - (time if time > {m.warmup!r} else {m.warmup!r})"
    else:
        interval = "t - time"  # time is never below 0, so all of it counts
    lines = [f"    dt = {interval}",
             "    if dt > 0:"]
    if any(kind.name not in LEVEL_SOURCES for kind in m.stage_kinds):
        lines.append("        areas = tuple([x + level * dt for x, level in zip(areas, levels(m, c))])")
    else:
        terms, k = [], 0
        for p in range(len(m.program.pools)):
            lines.append(f"        p{p} = pools[{p}]")
            terms += [f"areas[{k}] + p{p}.allocated * dt", f"areas[{k + 1}] + p{p}.cached * dt",
                      f"areas[{k + 2}] + len(p{p}.queue) * dt",
                      f"areas[{k + 3}] + {'len(p%d.holders)' % p if m.holds_once else 'holding_sessions(p%d)' % p} * dt"]
            k += 4
        for s, kind in enumerate(m.stage_kinds):
            lines.append(f"        s{s} = stages[{s}]")
            lines.append(f"        n{s} = len(s{s}.jobs)")
            terms += [f"areas[{k}] + n{s} * dt", f"areas[{k + 1}] + {LEVEL_SOURCES[kind.name](m, s, f's{s}')} * dt"]
            k += 2
        terms.append(f"areas[{k}] + len(sessions) * dt")
        lines.append("        areas = (" + ", ".join(terms) + ",)")
    return lines


def _define(m: Machine, lines: list[str], name: str):
    namespace: dict = {"m": m, "levels": levels, "holding_sessions": holding_sessions, "new": tuple.__new__,
                       "Configuration": Configuration}
    exec("\n".join(lines) + "\n", namespace)
    return namespace[name]
