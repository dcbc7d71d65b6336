"""The Lean bridge: the Lean fragment of serQ and three checks of it.

- ``lean/``: Lean 4 sources of the fragment (syntax, machine, tick,
  ``Exec.run``, ``outcome``) and, generated, the recorded vLLM scenarios as
  theorems proved by ``decide``.
- ``syntax`` and ``mirror``: a Python transcription of those definitions,
  rule for rule, over ``arith`` (ℕ as Python integers or Z3 terms). The
  mirror imports nothing from ``semantics``: it is a second implementation,
  independent of the small-step interpreter (a test scans its imports).
- ``translate``, ``scenario``, ``emit``: IR and scenarios into the fragment,
  and into Lean text; ``check``: the mirror and the interpreter against the
  recorded answers; ``prove``: the fragment's invariants by symbolic
  execution of the mirror's rules with Z3.

docs/lean.md says what each check does and does not establish.
"""
