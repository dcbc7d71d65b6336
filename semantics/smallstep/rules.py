"""The registry of rules: every rule of the semantics is one function,
registered under the name the step trace prints (docs/step-trace.md), with
its one-line meaning and the sentence of the specification it implements.

``@rule("pool/admit", meaning, seed)`` records the function and returns it
unchanged, so the registry costs nothing at run time. A rule's body has its
premises first and its conclusion last, and emits its own trace record once.
``serq-ref trace --rules`` prints the registry; tests/test_smallstep_rules.py
checks that the registry, the names the step traces print and the rule
tables of docs/semantics.md are the same set.
"""

from __future__ import annotations

from typing import Callable, NamedTuple


class Rule(NamedTuple):
    name: str  # what the step trace prints: family/name
    meaning: str  # one line
    seed: str  # the sentence of the specification it implements, with where it is
    function: str  # the function that is the rule: module.qualname


#: every rule by name, in the order the modules registered them
REGISTRY: dict[str, Rule] = {}


def rule(name: str, meaning: str, seed: str = "") -> Callable:
    """Register the decorated function as the rule ``name``."""

    def register(function: Callable) -> Callable:
        assert name not in REGISTRY, f"rule {name} registered twice ({REGISTRY[name].function})"
        REGISTRY[name] = Rule(name, meaning, seed, f"{function.__module__}.{function.__qualname__}")
        function.rule = name
        return function

    return register
