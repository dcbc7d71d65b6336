"""The shape of the definition (the brief's architecture, issue 8): what
each module of ``semantics/smallstep/`` may import, read from the source by
``ast`` (every import, at module level or inside a function, resolved to an
absolute module name).

- The core imports nothing of the syntax, the compiler, the CLI, the linker,
  ``oracle/`` or ``lean_bridge/``; of the rest of ``semantics`` only the IR,
  the errors, the results and the arithmetic (the operators, below everything).
- The facts are below the rules: ``machine``, ``observables``, ``values``,
  ``configuration`` and the other modules below them import no rule module
  (pools, sessions, stages, workload, settle, measure, driver).
- The rules' mutual recursion (pools <-> sessions <-> stages) is the only
  circle, and every import that closes it is local to a function and says
  why on its line.
"""

from __future__ import annotations

import ast
import pathlib

ROOT = pathlib.Path(__file__).resolve().parent.parent / "semantics" / "smallstep"
PACKAGE = "semantics.smallstep"

#: modules that hold rules (a configuration to a configuration)
RULES = {"pools", "sessions", "stages", "workload", "settle", "measure", "driver"}
#: modules below the rules: what a rule reads and writes, never a rule
FACTS = {"configuration", "machine", "observables", "values", "rng", "estimates", "steptrace", "invariants", "rules"}


def module_name(path: pathlib.Path) -> str:
    parts = path.relative_to(ROOT.parent.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: pathlib.Path):
    """(absolute module imported, line, whether at module level, the source line) for every import in ``path``."""
    tree = ast.parse(path.read_text())
    package = module_name(path) if path.name == "__init__.py" else module_name(path).rpartition(".")[0]
    top = set(id(n) for n in tree.body)
    lines = path.read_text().splitlines()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node.lineno, id(node) in top, lines[node.lineno - 1]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module
            names = [target] if node.module else [f"{target}.{a.name}" for a in node.names]
            if node.module:
                names += [f"{target}.{a.name}" for a in node.names]
            for name in names:
                yield name, node.lineno, id(node) in top, lines[node.lineno - 1]


def smallstep_module(name: str) -> str | None:
    """The first component under semantics.smallstep of ``name`` (a module of the core), or None."""
    if not name.startswith(PACKAGE + "."):
        return None
    return name[len(PACKAGE) + 1:].split(".")[0]


SOURCES = sorted(ROOT.rglob("*.py"))


def test_the_core_imports_nothing_outside_ir_errors_results():
    for path in SOURCES:
        for name, line, _, text in imports(path):
            if name.startswith("semantics.") and not name.startswith(PACKAGE):
                assert name.split(".")[1] in ("ir", "errors", "results", "arithmetic"), f"{path}:{line}: {text.strip()}"
            assert not name.split(".")[0] in ("oracle", "lean_bridge"), f"{path}:{line}: {text.strip()}"


def test_the_facts_import_no_rule():
    for path in SOURCES:
        own = smallstep_module(module_name(path))
        if own not in FACTS:
            continue
        for name, line, _, text in imports(path):
            assert smallstep_module(name) not in RULES, f"{path}:{line}: a module of facts imports a rule: {text.strip()}"


def test_every_module_is_a_fact_or_a_rule():
    for path in SOURCES:
        own = smallstep_module(module_name(path))
        assert own is None or own in FACTS | RULES, f"{path}: neither a fact nor a rule module; say which in this test"


def test_the_rules_recursion_is_local_and_says_why():
    """An import from a rule module to one that imports it back (the semantics'
    own mutual recursion) sits inside the function that needs it, with a
    comment on its line saying why."""
    graph: dict[str, set[str]] = {}
    local: list[tuple[str, str, pathlib.Path, int, str]] = []
    for path in SOURCES:
        own = smallstep_module(module_name(path))
        for name, line, at_top, text in imports(path):
            other = smallstep_module(name)
            if other is None or other == own:
                continue
            if at_top:
                graph.setdefault(own, set()).add(other)
            else:
                local.append((own, other, path, line, text))
    # the module-level imports form no circle
    def reaches(start: str, goal: str, seen=()) -> bool:
        return any(nxt == goal or (nxt not in seen and reaches(nxt, goal, seen + (nxt,))) for nxt in graph.get(start, ()))
    for own in graph:
        assert not reaches(own, own), f"a circle of module-level imports through {own}"
    for own, other, path, line, text in local:
        assert "#" in text, f"{path}:{line}: a local import without a comment saying why: {text.strip()}"
