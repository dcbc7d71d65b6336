"""The small-step operational semantics of serQ: the definition of what a
program means (seed 002 §3), written to be read before it is written to be
fast. A configuration is an immutable value; each named rule takes one and
returns the next; settle cleans up after every event. Anything faster must be
checked against this package, never the other way round.

Entry points: ``driver.run`` (a RunResult), ``driver.trace`` (the applied
rules, docs/step-trace.md), ``invariants.check_invariants``. The rules are
listed by name, with the seed sentences they implement, in docs/semantics.md.
"""
