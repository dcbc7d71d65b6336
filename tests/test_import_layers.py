"""The project's modules sit in layers: outside the semantics' own mutual
recursion (pools <-> sessions <-> stages, tests/test_smallstep_structure.py),
no module imports, at module level or inside a function, a module that
imports it back, directly or through others.

Three circles were cut (docs/architecture.md says where each part lives):
the command lines (the main one registers the oracle's and the peer's
subcommands; what they share is ``semantics.cli_common``, serq-ref's version
``semantics``'s), the compiler and the loader (a program's text is read by
``semantics.textfile``), and the linker's solver and verdicts (what is asked
and the answers are ``semantics.link.questions``). The imports that closed
them are named below, so that a failure says which came back.
"""

from __future__ import annotations

import pathlib

from test_smallstep_structure import imports, module_name

ROOT = pathlib.Path(__file__).resolve().parent.parent
PACKAGES = ("semantics", "oracle", "lean_bridge", "ir_schema")
SOURCES = sorted(p for package in PACKAGES for p in (ROOT / package).rglob("*.py"))
MODULES = {module_name(p): p for p in SOURCES}

#: the one circle the semantics has by design (its rules call each other)
RULES_RECURSION = "semantics.smallstep."
RECURSIVE_RULES = ("pools", "sessions", "stages")

#: (importer, imported): the imports that closed the circles that were cut
CUT = [
    ("oracle.peer_cli", "semantics.cli"),
    ("oracle.schedule_log", "semantics.cli"),
    ("semantics.compiler", "semantics.pipeline"),
    ("semantics.link.solver", "semantics.link.verdicts"),
]


def graph() -> dict[str, set[str]]:
    """Module -> the project's modules it imports (a name imported from a module is the module)."""
    edges: dict[str, set[str]] = {name: set() for name in MODULES}
    for name, path in MODULES.items():
        for target, _, _, _ in imports(path):
            while target and target not in MODULES:  # `from a.b import f` names a.b.f: the module is a.b
                target = target.rpartition(".")[0]
            if target and target != name:
                edges[name].add(target)
    return edges


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted, in name order."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(edges[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return sorted(found)


def is_rule_module(name: str) -> bool:
    return name.startswith(RULES_RECURSION) and name[len(RULES_RECURSION):].split(".")[0] in RECURSIVE_RULES


def test_the_graph_reads_the_project():
    edges = graph()
    assert {"semantics.cli", "semantics.cli_common", "semantics.textfile", "semantics.link.questions",
            "oracle.peer_cli", "semantics.smallstep.pools"} <= set(edges)
    assert "oracle.peer_cli" in edges["semantics.cli"]  # the main command line registers `peer`
    assert {"semantics.link.questions", "semantics.link.solver"} <= edges["semantics.link.verdicts"]


def test_the_only_circle_is_the_rules_recursion():
    found = circles(graph())
    outside = [c for c in found if not all(is_rule_module(m) for m in c)]
    assert outside == [], f"modules that import each other, directly or through others: {outside}"
    assert len(found) == 1 and "semantics.smallstep.pools" in found[0]  # the recursion is still seen


def test_the_cut_imports_stay_cut():
    edges = graph()
    back = [(a, b) for a, b in CUT if b in edges[a]]
    assert back == [], f"an import that closed a circle is back: {back}"


def test_the_finder_finds_a_circle():
    """The check can fail: the cut imports put back make their circles again."""
    edges = graph()
    for a, b in CUT:
        edges[a].add(b)
    found = circles(edges)
    for a, b in CUT:
        assert any(a in c and b in c for c in found), (a, b)
