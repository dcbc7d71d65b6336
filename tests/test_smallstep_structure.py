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
- The rule modules stack (RULE_LAYERS): pools, workload and measure at the
  bottom, then the stages, the sessions' statements, settle (the loops that
  drain the follow-up work) and the driver; a rule module
  imports rule modules of lower layers only, and every import between the
  core's modules is at module level. A rule leaves the work of another
  family as data (Configuration.work), never by calling it (issue 22).
"""

from __future__ import annotations

import ast
import pathlib

ROOT = pathlib.Path(__file__).resolve().parent.parent / "semantics" / "smallstep"
PACKAGE = "semantics.smallstep"

#: modules that hold rules (a configuration to a configuration)
RULES = {"pools", "sessions", "stages", "workload", "settle", "measure", "driver", "sharing", "groups",
         "window_sharing"}
#: modules below the rules: what a rule reads and writes, never a rule
FACTS = {"configuration", "machine", "observables", "values", "rng", "estimates", "steptrace", "invariants", "rules",
         "blocks", "windows"}
#: the rule modules from the bottom up: each imports rule modules of the layers below its own only
RULE_LAYERS = ({"sharing", "groups"}, {"window_sharing"}, {"pools", "workload", "measure"}, {"stages"}, {"sessions"}, {"settle"}, {"driver"})


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


def layer_of(module: str) -> int:
    return next(k for k, layer in enumerate(RULE_LAYERS) if module in layer)


def rule_imports(sources=SOURCES) -> list[tuple[str, str, pathlib.Path, int, bool, str]]:
    """(importer, imported, file, line, at module level, source line) for every import of one core module by another."""
    found = []
    for path in sources:
        own = smallstep_module(module_name(path))
        for name, line, at_top, text in imports(path):
            other = smallstep_module(name)
            if other is not None and other != own:
                found.append((own, other, path, line, at_top, text))
    return found


def test_every_rule_module_has_a_layer():
    assert RULES == set().union(*RULE_LAYERS)


def test_the_core_imports_at_module_level():
    """No import between the core's modules sits inside a function: none closes a circle any more."""
    local = [f"{path}:{line}: {text.strip()}" for _, _, path, line, at_top, text in rule_imports() if not at_top]
    assert local == [], local


def test_the_rule_modules_stack():
    """A rule module imports rule modules of lower layers only (a stage's rules never a session's,
    a pool's never a stage's or a session's): follow-up work goes up as data, settle applies it."""
    up = [f"{path}:{line}: {text.strip()}" for own, other, path, line, _, text in rule_imports()
          if own in RULES and other in RULES and layer_of(other) >= layer_of(own)]
    assert up == [], f"a rule module imports one of its own layer or above: {up}"


def test_the_stack_check_can_fail(tmp_path):
    """An import of a session's rule by a pool module (what the rejection did) is seen."""
    package = tmp_path / "semantics" / "smallstep"
    package.mkdir(parents=True)
    fake = package / "pools.py"
    fake.write_text("def reject():\n    from .sessions import end_session  # the old recursion\n")
    global ROOT
    saved = ROOT
    ROOT = package
    try:
        found = rule_imports([fake])
    finally:
        ROOT = saved
    assert {(own, other, at_top) for own, other, _, _, at_top, _ in found} == {("pools", "sessions", False)}
    assert layer_of("sessions") > layer_of("pools")
