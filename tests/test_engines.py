"""The definition and the fast engine (issue 22 §1): semantics/smallstep holds
the rules only, no fast form and no generated source; the fast engine
(semantics/fast) gives the same RunResult bytes, and the commands choose it
unless told ``--engine definition``.
"""

from __future__ import annotations

import ast
import pathlib

import pytest

from semantics import fast
from semantics.cli import main
from semantics.compiler import compile_source
from semantics.smallstep import driver

ROOT = pathlib.Path(__file__).resolve().parent.parent
DEFINITION = ROOT / "semantics" / "smallstep"
FAST = ROOT / "semantics" / "fast"

#: builtins that run or build code from text
CODE_FROM_TEXT = {"exec", "eval", "compile"}


def fast_dialect(path: pathlib.Path) -> list[str]:
    """Where ``path`` runs generated source (exec, eval, the builtin compile), builds a
    record by ``tuple.__new__``, or defines a function whose name says it is a fast form."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in CODE_FROM_TEXT:
            found.append(f"{path.name}:{node.lineno}: {node.func.id}(...)")
        elif (isinstance(node, ast.Attribute) and node.attr == "__new__" and isinstance(node.value, ast.Name)
              and node.value.id == "tuple"):
            found.append(f"{path.name}:{node.lineno}: tuple.__new__")
        elif isinstance(node, ast.FunctionDef) and (node.name.endswith("_fast") or node.name.startswith("fast_")):
            found.append(f"{path.name}:{node.lineno}: def {node.name}")
    return found


def test_the_definition_has_no_fast_form():
    found = [hit for path in sorted(DEFINITION.rglob("*.py")) for hit in fast_dialect(path)]
    assert found == [], f"a fast form or generated source in semantics/smallstep: {found}"


def test_the_fast_dialect_check_can_fail():
    """The fast engine's own modules are where the dialect is, and the check sees it there."""
    found = [hit for path in sorted(FAST.rglob("*.py")) for hit in fast_dialect(path)]
    assert any("exec(...)" in hit for hit in found) and any("tuple.__new__" in hit for hit in found)
    assert any("def complete_fast" in hit for hit in found)


PROGRAM = """pool kv { cap 8; block 2; }
stage s : fifo(2);
stage think : delay;
workload { arrive poisson(1.5); }
session { set t0 = now; hold kv (3) { run s (~exp(1)); } cache (3) run think (~exp(0.5)); observe w = now - t0; }
run { horizon 40; warmup 2; seed 7; }
"""


def test_the_two_engines_give_the_same_result():
    program = compile_source(PROGRAM, "<two engines>")[0]
    definition = driver.run(program)
    assert definition.ended > 20
    assert repr(fast.run(program)) == repr(definition)


@pytest.mark.parametrize("command", ["run", "sweep"])
def test_engine_definition_prints_what_the_fast_engine_prints(command, tmp_path, capsys):
    path = tmp_path / "p.sq"
    path.write_text(PROGRAM, encoding="utf-8")
    extra = ["--set", "x=1,2", "--horizon", "20"] if command == "sweep" else []
    if command == "sweep":
        path.write_text("let x = 1;\n" + PROGRAM, encoding="utf-8")
    assert main([command, str(path), *extra]) == 0
    default = capsys.readouterr().out
    assert main([command, str(path), *extra, "--engine", "definition"]) == 0
    assert capsys.readouterr().out == default and default


def test_engine_takes_only_the_two_names(tmp_path, capsys):
    path = tmp_path / "p.sq"
    path.write_text(PROGRAM, encoding="utf-8")
    assert main(["run", str(path), "--engine", "quick"]) == 2
    assert "--engine" in capsys.readouterr().err
