"""The arithmetic the mirror's rules are written over: ℕ, either as Python
integers (the mirror runs a program) or as Z3 integer terms (lean prove
executes the same rules symbolically).

Lean's ``Nat`` has truncated subtraction and ``n / 0 = 0``; a rule written
with these helpers means the same on both kinds of value:

- ``holds(c)``: the one place a rule branches on a value. On a Python bool it
  is that bool; on a Z3 condition it asks the active ``Explorer`` (prove.py),
  which follows one feasible side and queues the other, so that every path
  through a rule is executed.
- ``monus``, ``nmin``, ``nmax``, ``ite``: ``a - b`` truncated at 0, ``min``,
  ``max``, ``if c then a else b``; on Z3 terms they are ``If`` terms (no
  branching).
- ``nmul``, ``ndiv``: ``*`` and Lean's ``/``. With both operands symbolic the
  product or quotient is not linear; it is then an uninterpreted function
  (a value ≥ 0 that depends only on its operands), which is an
  over-approximation: a property proved with it holds for the true product.

``+`` and the comparisons are Python's own operators, which Z3 terms share.
Nothing here imports Z3 until a symbolic value appears.
"""

from __future__ import annotations

from typing import Any

#: The explorer that decides symbolic conditions (prove.py sets it).
_explorer: Any = None


def set_explorer(explorer: Any) -> Any:
    """Make ``explorer`` the one ``holds`` consults; returns the previous one."""
    global _explorer
    previous, _explorer = _explorer, explorer
    return previous


def is_concrete(*values: Any) -> bool:
    return all(isinstance(v, (int, bool)) for v in values)


def holds(condition: Any) -> bool:
    """Whether ``condition`` holds: a Python bool as it is; a Z3 condition by
    the active explorer (which executes both sides, one path at a time)."""
    if isinstance(condition, bool):
        return condition
    if _explorer is None:
        raise TypeError(f"a symbolic condition with no explorer active: {condition}")
    return _explorer.decide(condition)


def monus(a: Any, b: Any) -> Any:
    """Lean's ``a - b`` on ``Nat``: 0 when ``b ≥ a``."""
    if is_concrete(a, b):
        return a - b if a >= b else 0
    import z3

    return z3.If(a >= b, a - b, 0)


def nmin(a: Any, b: Any) -> Any:
    """Lean's ``min a b`` (``if a ≤ b then a else b``)."""
    if is_concrete(a, b):
        return a if a <= b else b
    import z3

    return z3.If(a <= b, a, b)


def nmax(a: Any, b: Any) -> Any:
    """Lean's ``max a b`` (``if a ≤ b then b else a``)."""
    if is_concrete(a, b):
        return b if a <= b else a
    import z3

    return z3.If(a <= b, b, a)


def ite(condition: Any, a: Any, b: Any) -> Any:
    """``if condition then a else b`` as a value (no branch of control)."""
    if isinstance(condition, bool):
        return a if condition else b
    import z3

    return z3.If(condition, a, b)


def nmul(a: Any, b: Any) -> Any:
    """``a * b``: linear when an operand is a number, else an uninterpreted product."""
    if is_concrete(a) or is_concrete(b):
        return a * b
    return _explorer.uninterpreted("mul", a, b)


def ndiv(a: Any, b: Any) -> Any:
    """Lean's ``a / b`` on ``Nat`` (floor; ``a / 0 = 0``)."""
    if is_concrete(a, b):
        return a // b if b > 0 else 0
    if is_concrete(b):
        import z3

        return z3.IntVal(0) if b == 0 else a / b  # Z3's div by a positive constant is floor on naturals
    return _explorer.uninterpreted("div", a, b)
