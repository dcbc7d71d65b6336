"""The fast engine: the same runs as the definition (semantics/smallstep),
the same RunResult bytes, faster.

semantics/smallstep is the definition, every rule readable, premises then
conclusion; it imports nothing of this package (tests/test_import_layers.py).
This package imports the definition and overrides parts of it: forms.py is
the table of its fast forms (each folds rules of the definition into one
update, or writes time/advance out as Python source for a program); the
rules it does not speed up are the definition's own. loop.py is its own
loop for programs of the commonest shape (a workload, fifo, delay and ps
stages, no pool, gauge or query of the state): the same rules on mutable
state inside one run, the last configuration built for build_result.
step.py forms and ends a step engine's iterations (lib/vllm.sq's shape)
with fewer configurations, and flow.py runs settle's loops of rules with
pool/admit and pool/release written with setters. steploop.py is its own
loop for lib/vllm.sq's engine and pools (the oracle's scenarios and
replays): mutable state inside one run, the run given back to the fast
forms from its start where it meets a preemption or the like.
``run`` is what `serq-ref
run`, `sweep`, the oracle and the campaigns use; `--engine definition` runs
the definition instead, and `trace`, the property tests and the Lean bridge
always run the definition. The digest, the examples, the property programs and
the differential campaign hold the two equal (tests/test_engines_equal.py).
"""

from __future__ import annotations

from .engine import build_machine, machine_for, run

__all__ = ["build_machine", "machine_for", "run"]
