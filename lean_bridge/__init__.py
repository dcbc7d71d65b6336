"""Lean emission and the Lean fragment's executable mirror.

Not built yet (a later issue). The mirror will be an independent second
implementation: it must import nothing from ``semantics``.
"""
