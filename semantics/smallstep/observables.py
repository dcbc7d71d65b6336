"""What expressions and the time averages read of the state (seed 002 §2,
Expressions: "observables queue(s), busy(s), work(s), used(p), free(p),
cachedin(p), holders(p), queued(p)"), below every rule: the pool queries read
the pool records, the stage queries go through each stage's kind
(``Machine.stage_kinds``, stages.StageKind), so this module imports no rule.

- ``used(p)``: the allocated units; ``free(p)``: cap minus allocated;
  ``cachedin(p)``: the session's own cached prefix in p; ``holders(p)``;
  ``queued(p)``: sessions in p's queue.
- ``queue(s)``: the jobs present at s (waiting or in service); ``busy(s)``:
  those in service; ``work(s)``: what is left of their work.
- ``budget_left(s)``: inside step stage s's admissions, the budget its
  iteration has left; elsewhere its plan (stages/step.py, ``budget_plan``).
- ``levels``: every level a time average is taken of (Configuration.areas).
"""

from __future__ import annotations

from .blocks import hold_hit
from .configuration import Configuration, own_entry_index


def make_observables(m) -> dict:
    """The pool and stage queries expressions read: name -> f(env, index)."""
    kinds = m.stage_kinds

    def used(env, p: int) -> float:
        return env.config.pools[p].allocated

    def free(env, p: int) -> float:
        return m.caps[p] - env.config.pools[p].allocated

    def cachedin(env, p: int) -> float:
        if env.config.pools[p].table is not None:  # shares prefixes: the admission's hit, else 0
            if env.stmt is None or env.stmt not in m.holds:
                return 0.0
            return hold_hit(m, env.config, p, env.stmt, env)
        entries = env.config.pools[p].entries
        k = own_entry_index(entries, env.serial)
        return entries[k].units if k >= 0 else 0.0

    def holders(env, p: int) -> float:
        return float(holding_sessions(env.config.pools[p]))

    def queued(env, p: int) -> float:
        return float(len(env.config.pools[p].queue))

    def queue(env, s: int) -> float:
        return float(kinds[s].present(m, env.config, s))

    def busy(env, s: int) -> float:
        return kinds[s].busy(m, env.config, s)

    def work(env, s: int) -> float:
        return kinds[s].work(m, env.config, s)

    def budget_left(env, s: int) -> float:
        if env.budget is not None and env.budget[0] == s:  # inside the stage's admissions: the iteration's budget left
            return env.budget[1]
        return kinds[s].budget_plan(m, env.config, s)

    return {"Used": used, "Free": free, "CachedIn": cachedin, "Holders": holders, "Queued": queued,
            "Queue": queue, "Busy": busy, "Work": work, "BudgetLeft": budget_left}


def holding_sessions(pool) -> int:
    """``holders(p)``: the sessions holding an allocation in the pool (a
    session with a lease and a hold in it is one; docs/semantics.md,
    "The pool observables")."""
    holders = pool.holders
    if len(holders) < 2:
        return len(holders)
    return len({h.serial for h in holders})


def levels(m, c: Configuration) -> list[float]:
    """Every level a time average is taken of, in the order of Configuration.areas:
    per pool used, cached, queue length and holders; per stage jobs present and
    utilisation (its kind's ``level``); the live sessions."""
    out = []
    for pool in c.pools:
        out += (pool.allocated, pool.cached, len(pool.queue), holding_sessions(pool))
    for s, kind in enumerate(m.stage_kinds):
        out += (kind.present(m, c, s), kind.level(m, c, s))
    out.append(len(c.sessions))
    return out
