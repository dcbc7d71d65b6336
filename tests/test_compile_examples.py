"""Every program under examples/ compiles (none skipped silently): a program
compiles to IR, and a library (a file under a lib/ directory) parses and is
used by some program."""

from __future__ import annotations

from pathlib import Path

import pytest

from semantics import codec
from semantics.compiler import compile_file
from semantics.syntax import ast
from semantics.syntax.parser import parse_text

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
FILES = sorted(EXAMPLES.rglob("*.sq"))
PROGRAMS = [f for f in FILES if "lib" not in f.relative_to(EXAMPLES).parts]
LIBRARIES = [f for f in FILES if "lib" in f.relative_to(EXAMPLES).parts]


def test_there_are_examples() -> None:
    assert PROGRAMS, "examples/ has no program"


@pytest.mark.parametrize("path", PROGRAMS, ids=lambda p: str(p.relative_to(EXAMPLES)))
def test_example_compiles(path: Path) -> None:
    program, source_map = compile_file(str(path))
    assert program.version == 13
    assert codec.loads(codec.dumps(program)) == program
    assert len(source_map.stmts) == sum(len(block) for block in program.blocks)


@pytest.mark.parametrize("path", LIBRARIES, ids=lambda p: str(p.relative_to(EXAMPLES)))
def test_library_parses_and_is_used(path: Path) -> None:
    library = parse_text(path.read_text(), str(path))
    assert not any(isinstance(i, (ast.Workload, ast.SessionItem, ast.ServerItem, ast.RunBlock))
                   for i in library.items)
    users = [p for p in PROGRAMS if path.name in p.read_text()]
    assert users, f"no example uses {path.name}"
