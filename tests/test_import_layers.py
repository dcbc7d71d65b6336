"""The project's modules sit in layers: no module imports, at module level
or inside a function, a module that imports it back, directly or through
others.

Four circles were cut (docs/architecture.md says where each part lives):
the rules' (pools, sessions and the stage modules called each other's rules
through twelve imports inside functions; a rule's follow-up work is data in
the configuration now, which settle drains: issue 22, and the rule modules
stack, tests/test_smallstep_structure.py),
the command lines (the main one registers the oracle's and the peer's
subcommands; what they share is ``semantics.cli_common``, serq-ref's version
``semantics``'s), the compiler and the loader (a program's text is read by
``semantics.textfile``), and the linker's solver and verdicts (what is asked
and the answers are ``semantics.link.questions``). The imports that closed
them are named below, so that a failure says which came back.

The packages stack, too: ``semantics`` at the bottom, ``oracle`` above it,
``lean_bridge`` on top. No module imports one of a package above its own,
but the top command line (``semantics.cli``), which registers the oracle's,
the peer's and the Lean bridge's subcommands. (The one-request program of a
vLLM scenario, which oracle/differential.py runs, was built in
``lean_bridge.scenario``; it is ``oracle.scenario``'s now, with the check of
a scenario, and the JSON positions are ``semantics.jsonpos``'s.)

Inside ``semantics`` the definition stands alone: ``semantics.smallstep`` imports
nothing of the fast engine (``semantics.fast``), which imports the definition
and overrides parts of it.
"""

from __future__ import annotations

import pathlib

from test_smallstep_structure import imports, module_name

ROOT = pathlib.Path(__file__).resolve().parent.parent
PACKAGES = ("semantics", "oracle", "lean_bridge", "ir_schema")
SOURCES = sorted(p for package in PACKAGES for p in (ROOT / package).rglob("*.py"))
MODULES = {module_name(p): p for p in SOURCES}

#: (importer, imported): the imports that closed the circles that were cut
CUT = [
    ("semantics.smallstep.pools", "semantics.smallstep.sessions"),  # a rejected hold ended its session
    ("semantics.smallstep.pools", "semantics.smallstep.stages"),  # a spill write's job, a preempted job's leaving
    ("semantics.smallstep.pools", "semantics.smallstep.stages.step"),  # a parked victim, the decoding key
    ("semantics.smallstep.stages.step", "semantics.smallstep.sessions"),  # an admitted session run at once
    ("oracle.peer_cli", "semantics.cli"),
    ("oracle.schedule_log", "semantics.cli"),
    ("semantics.compiler", "semantics.pipeline"),
    ("semantics.link.solver", "semantics.link.verdicts"),
]

#: The packages from the bottom up: a module imports nothing of a package above its own.
STACK = ("semantics", "oracle", "lean_bridge")
#: The one module that imports upward: the top command line registers the subcommands above it.
TOP_COMMAND_LINE = "semantics.cli"


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


def upward(edges: dict[str, set[str]]) -> list[tuple[str, str]]:
    """(importer, imported) for every import of a module of a package higher in STACK, in name order."""
    level = {package: k for k, package in enumerate(STACK)}

    def height(module: str) -> int:
        return level.get(module.split(".")[0], -1)

    return [(a, b) for a in sorted(edges) for b in sorted(edges[a])
            if height(a) >= 0 and height(b) > height(a)]


def test_the_graph_reads_the_project():
    edges = graph()
    assert {"semantics.cli", "semantics.cli_common", "semantics.textfile", "semantics.link.questions",
            "oracle.peer_cli", "semantics.smallstep.pools"} <= set(edges)
    assert "oracle.peer_cli" in edges["semantics.cli"]  # the main command line registers `peer`
    assert {"semantics.link.questions", "semantics.link.solver"} <= edges["semantics.link.verdicts"]


def test_no_module_imports_one_that_imports_it_back():
    found = circles(graph())
    assert found == [], f"modules that import each other, directly or through others: {found}"


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


def test_the_packages_stack():
    """semantics < oracle < lean_bridge: only the top command line imports upward."""
    found = upward(graph())
    assert [(a, b) for a, b in found if a != TOP_COMMAND_LINE] == [], "an import of a package above the importer's"
    # the command line's registrations are seen (the check reads function-level imports too)
    assert {("semantics.cli", "lean_bridge.cli"), ("semantics.cli", "oracle.cli"),
            ("semantics.cli", "oracle.peer_cli")} <= set(found)


#: the definition, and the fast engine beside it (issue 22 §1)
DEFINITION = "semantics.smallstep"
FAST = "semantics.fast"


def definition_imports_of_fast(edges: dict[str, set[str]]) -> list[tuple[str, str]]:
    """(importer, imported) for every import of the fast engine by a module of the definition."""
    return [(a, b) for a in sorted(edges) if a == DEFINITION or a.startswith(DEFINITION + ".")
            for b in sorted(edges[a]) if b == FAST or b.startswith(FAST + ".")]


def test_the_definition_imports_nothing_of_the_fast_engine():
    edges = graph()
    assert definition_imports_of_fast(edges) == [], "semantics/smallstep imports semantics/fast"
    # the fast engine is seen, and it does import the definition (which it overrides in parts)
    assert "semantics.fast.engine" in edges and "semantics.smallstep.driver" in edges["semantics.fast.engine"]


def test_the_definition_check_can_fail():
    edges = graph()
    edges["semantics.smallstep.driver"].add("semantics.fast.forms")
    assert definition_imports_of_fast(edges) == [("semantics.smallstep.driver", "semantics.fast.forms")]


def test_the_oracle_imports_nothing_of_the_lean_bridge():
    edges = graph()
    found = [(a, b) for a in sorted(edges) if a.split(".")[0] == "oracle"
             for b in sorted(edges[a]) if b.split(".")[0] == "lean_bridge"]
    assert found == [], f"oracle/ imports lean_bridge/: {found}"
    assert "semantics.jsonpos" in edges["oracle.scenario"] and "oracle.scenario" in edges["lean_bridge.scenario"]


def test_the_stack_check_can_fail():
    """An import up the stack is seen: the oracle's of the bridge's scenario builder that was moved
    down, a semantics module's of the oracle's."""
    edges = graph()
    edges["oracle.differential"].add("lean_bridge.scenario")
    edges["semantics.jsonpos"].add("oracle.scenario")
    assert {("oracle.differential", "lean_bridge.scenario"), ("semantics.jsonpos", "oracle.scenario")} <= \
        set(upward(edges))
