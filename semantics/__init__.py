"""serq-ref: the reference semantics of serQ.

Priorities, in order: correct, complete, readable. The small-step semantics in
``semantics.smallstep`` is the definition of what a serQ program means; it runs
on the IR alone. Anything faster must live beside it and be checked against it.
"""

SERQ_VERSION = "0.1.0"
