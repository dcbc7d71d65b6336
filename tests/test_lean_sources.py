"""The Lean sources and their Python transcription correspond definition for
definition. No Lean toolchain is installed here (docs/lean.md says how to
build them elsewhere); what can be checked without one is checked: every
Lean definition has its mirror function, every structure its fields, every
enumeration its constructors, every module its import.
"""

from __future__ import annotations

import ast
import dataclasses
import re
from enum import Enum
from pathlib import Path

from lean_bridge import syntax
from lean_bridge.mirror import expr, state

ROOT = Path(__file__).resolve().parent.parent
LEAN = ROOT / "lean_bridge" / "lean"
MODULES = ("Syntax", "State", "Eval", "Pools", "Sessions", "Engine", "Exec")


def lean_text() -> str:
    return "\n".join((LEAN / "SerqRef" / f"{m}.lean").read_text() for m in MODULES)


def lean_defs() -> set[str]:
    names = set()
    for module in MODULES:
        namespace = ""
        for line in (LEAN / "SerqRef" / f"{module}.lean").read_text().splitlines():
            if line.startswith("namespace ") and line.strip() != "namespace SerqRef":
                namespace = line.split()[1] + "."
            elif line.startswith("end ") and namespace and line.split()[1] + "." == namespace:
                namespace = ""
            match = re.match(r"def ([A-Za-z.]+)", line)
            if match:
                names.add(namespace + match[1])
    return names


def mirror_citations() -> dict[str, str]:
    """Each mirror function: the Lean name its docstring cites first."""
    out = {}
    for path in sorted((ROOT / "lean_bridge" / "mirror").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef):
                doc = ast.get_docstring(node) or ""
                match = re.match(r"``([A-Za-z.]+)", doc)
                if match:
                    out[f"{path.stem}.{node.name}"] = match[1]
                elif not doc.startswith("(Python only)") and node.name not in ("__init__", "value"):
                    out[f"{path.stem}.{node.name}"] = "?"
    return out


def test_the_package_and_its_modules() -> None:
    assert (LEAN / "lean-toolchain").read_text().startswith("leanprover/lean4:v4.")
    lakefile = (LEAN / "lakefile.lean").read_text()
    assert "lean_lib SerqRef" in lakefile and "lean_lib SerqRefOracle" in lakefile
    root = (LEAN / "SerqRef.lean").read_text()
    assert all(f"import SerqRef.{m}\n" in root for m in MODULES)
    for module in MODULES[1:]:
        first = (LEAN / "SerqRef" / f"{module}.lean").read_text().splitlines()[0]
        imported = first.split()[1]
        assert first.startswith("import SerqRef.") and imported.split(".")[1] in MODULES[:MODULES.index(module)]
    oracle = (LEAN / "SerqRefOracle.lean").read_text()
    assert oracle.startswith("import SerqRefOracle.Vllm.All\nimport SerqRefOracle.Serve.All\n")


def test_no_definition_escapes_the_kernel() -> None:
    """decide evaluates in the kernel: no partial or well-founded definition,
    no axiom, no sorry."""
    text = lean_text()
    for word in ("partial def", "termination_by", "decreasing_by", "sorry", "axiom", "unsafe", "native_decide"):
        assert word not in text, word


def test_every_lean_definition_has_its_mirror() -> None:
    cited = set(mirror_citations().values())
    missing = lean_defs() - cited
    assert not missing, missing


def test_every_mirror_function_cites_a_lean_definition() -> None:
    defs = lean_defs() | {"List.getD", "List.set"}
    wrong = {f: name for f, name in mirror_citations().items() if name not in defs}
    assert not wrong, wrong


def _lean_structures() -> dict[str, list[str]]:
    out = {}
    for match in re.finditer(r"^structure (\w+) where\n((?:  .*\n|\n)*?)(?=\S|\Z)", lean_text(), re.M):
        fields = []
        for line in match[2].splitlines():
            field = re.match(r"  (\w+) : ", line)
            if field:
                fields.append(field[1])
            elif line.startswith("  deriving"):
                break
        out[match[1]] = fields
    return out


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)([A-Z])", r"_\1", name).lower()


PYTHON_CLASSES = {
    "Use": syntax.Use, "Pool": syntax.Pool, "ServeKey": syntax.ServeKey, "Engine": syntax.Engine,
    "Spec": syntax.Spec, "Slots": syntax.Slots, "Program": syntax.Program, "Frame": state.Frame,
    "ActiveHold": state.ActiveHold, "Session": state.Session, "Holder": state.Holder, "Entry": state.Entry,
    "PoolState": state.PoolState, "Resident": state.Resident, "Assignment": state.Assignment,
    "Iteration": state.Iteration, "Sample": state.Sample, "Machine": state.Machine, "Env": expr.Env,
}


def test_every_structure_has_the_same_fields_in_the_same_order() -> None:
    structures = _lean_structures()
    assert set(structures) == set(PYTHON_CLASSES)
    for name, cls in PYTHON_CLASSES.items():
        assert [_snake(f) for f in structures[name]] == [f.name for f in dataclasses.fields(cls)], name


ENUMS = {"Ctx": syntax.Ctx, "Mode": syntax.Mode, "Order": syntax.Order, "SelfPreemption": syntax.SelfPreemption,
         "FrameKind": state.FrameKind, "Status": state.Status}


def test_every_enumeration_has_the_same_constructors() -> None:
    text = lean_text()
    for name, cls in ENUMS.items():
        body = re.search(rf"^inductive {name} where\n((?:  .*\n)+)", text, re.M)[1]
        constructors = re.findall(r"^  \| (\w+)", body, re.M)
        assert constructors == [member.value for member in cls], name
        assert issubclass(cls, Enum)


def test_every_expression_and_statement_constructor_is_transcribed() -> None:
    text = lean_text()
    expr_body = re.search(r"^inductive Expr where\n((?:  .*\n)+)", text, re.M)[1]
    constructors = re.findall(r"^  \| (\w+)", expr_body, re.M)
    assert constructors[:7] == ["num", "attr", "ctx", "queued", "cachedIn", "holders", "budgetLeft"]
    assert tuple(constructors[7:-2]) == syntax.BINARY_OPS and constructors[-2:] == ["not", "cond"]
    stmt_body = re.search(r"^inductive Stmt where\n((?:  .*\n)+)", text, re.M)[1]
    assert re.findall(r"^  \| (\w+)", stmt_body, re.M) == ["set", "observe", "turn", "hold", "step", "delay",
                                                           "branch", "finish"]


def _lean_def(module: str, name: str) -> str:
    text = (LEAN / "SerqRef" / f"{module}.lean").read_text()
    body = re.search(rf"^def {name} .*?(?=^/--|^def |^end )", text, re.M | re.S)
    assert body, name
    return body[0]


def test_the_self_preemption_rule_is_the_engines_data_and_the_tick_does_both() -> None:
    """Issue 11 and D1: the syntax type carries the step engine's rule, and
    growTurn ends the pass under `.ends` and goes on under `.continues` (the
    mirror's grow_turn the same)."""
    engine = re.search(r"^structure Engine where\n((?:  .*\n)+)", lean_text(), re.M)[1]
    assert "  selfPreemption : SelfPreemption\n" in engine
    grow = _lean_def("Engine", "growTurn")
    assert "match p.engine.selfPreemption with" in grow
    ends = re.search(r"\| \.ends => \(m, \{ it with pending := none, stopped := true \}\)", grow)
    continues = re.search(r"\| \.continues => \(m, \{ it with pending := none \}\)", grow)
    assert ends and continues
    mirror = (ROOT / "lean_bridge" / "mirror" / "engine.py").read_text()
    assert "if p.engine.self_preemption is SelfPreemption.ENDS:" in mirror
    assert [m.value for m in syntax.SelfPreemption] == ["ends", "continues"]


def test_a_second_preemption_keeps_the_furthest_position() -> None:
    """pool/preempt: computed := max(position, computed), in Lean and in the mirror."""
    assert "(max position (s.attrs.getD p.slots.computed 0))" in _lean_def("Sessions", "preempt")
    mirror = (ROOT / "lean_bridge" / "mirror" / "sessions.py").read_text()
    assert "nmax(position, get_d(s.attrs, p.slots.computed, 0))" in mirror


def test_holders_is_evaluated_as_in_the_mirror() -> None:
    assert "  | .holders q => (m.pool q).holders.length\n" in (LEAN / "SerqRef" / "Eval.lean").read_text()
    assert "if kind is Holders:\n        return len(pool_of(m, e.pool).holders)" in \
        (ROOT / "lean_bridge" / "mirror" / "expr.py").read_text()


def test_every_constructor_a_generated_theorem_uses_is_declared() -> None:
    """Without a Lean toolchain here, a static check of the generated files
    against the sources: every `.name` in a program term (the committed
    theorems of SerqRefOracle, the shared scenarios and the campaign cases
    with prefix caching) is a constructor Syntax.lean declares."""
    declared = set(re.findall(r"^  \| (\w+)", (LEAN / "SerqRef" / "Syntax.lean").read_text(), re.M))
    files = sorted((LEAN / "SerqRefOracle").rglob("Case*.lean")) + sorted((LEAN / "SerqRefOracle").rglob("[A-Z]*.lean"))
    used = set()
    for path in files:
        text = path.read_text()
        if "def program : Program :=" not in text:
            continue
        term = text.split("def program : Program :=", 1)[1].split("theorem recorded", 1)[0]
        term = re.sub(r"/-.*?-/", "", term, flags=re.S)  # the names in comments
        used |= set(re.findall(r"(?<![\w.])\.([a-z]\w*)", term))
    assert {"cachedIn", "holders", "budgetLeft", "div", "hold", "continues", "ends"} <= used
    assert used <= declared, sorted(used - declared)
