"""The front end's entry points: serQ text to IR version 13 and its SourceMap.

``compile_source`` parses (semantics.syntax.parser), resolves ``use``
(a library's items in place, read once, relative to the using file),
desugars (semantics.syntax.desugar) and lowers (semantics.syntax.lower).
The first error stops it: a ProgramError whose span is in the file it is in.
The IR-level checks (moments, hidden, lints, ranges) are the linker's, which
runs on the result.
"""

from __future__ import annotations

import dataclasses
import os
import sys
from functools import lru_cache
from typing import Mapping

from . import ir
from .errors import ErrorLog, ProgramError, Span
from .sourcemap import SourceMap, add_use_notes
from .syntax import ast
from .syntax.desugar import desugar_recovering
from .syntax.lower import lower_recovering
from .syntax.parser import parse_text
from .textfile import read_text

#: How deep ``use`` may nest before the front end calls it a cycle.
MAX_USE_DEPTH = 32
#: The recursion limit while compiling: the parse tree, the desugaring and
#: the lowering recurse over the program's nesting.
RECURSION_LIMIT = 20000


def resolve_uses(program: ast.Program, read: set[str], depth: int = 0,
                 uses: dict[str, Span] | None = None) -> tuple[ast.Item, ...]:
    """The program's items with each ``use`` replaced by the used file's items
    (themselves resolved); a file already read contributes nothing again.
    ``uses`` gets each file read -> the `use` that read it."""
    items: list[ast.Item] = []
    for item in program.items:
        if not isinstance(item, ast.Use):
            items.append(item)
            continue
        base = os.path.dirname(program.file)
        path = os.path.normpath(os.path.join(base, item.file))
        if path in read:
            continue
        if depth >= MAX_USE_DEPTH:
            raise ProgramError(f"`use` nests deeper than {MAX_USE_DEPTH} files", item.span)
        text = read_used_file(path, item)
        read.add(path)
        if uses is not None:
            uses[path] = item.span
        library = parse_library(text, path)
        for used in library.items:
            if isinstance(used, (ast.Workload, ast.SessionItem, ast.ServerItem, ast.RunBlock)):
                raise ProgramError("a library used by another file holds definitions only (let, def, pool, stage, "
                                   "queue, gauge)", used.span)
        items.extend(resolve_uses(library, read, depth + 1, uses))
    return tuple(items)


@lru_cache(maxsize=16)
def parse_library(text: str, path: str) -> ast.Program:
    """A used file's parse, kept for the next program that uses the same
    text from the same path (the oracle harness compiles thousands of
    scenario programs on lib/vllm.sq). The key is the text itself, so an
    edited library is parsed afresh; the AST is frozen, so sharing it is
    safe."""
    return parse_text(text, path)


def read_used_file(path: str, item: ast.Use) -> str:
    """The text of a used file: every file a program reads gets the main
    file's treatment (a missing file, a directory, bytes that are not UTF-8),
    as an error at the `use` that reads it."""
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read()
    except UnicodeDecodeError as error:
        raise ProgramError(f"`{item.file}` ({path}) is not UTF-8 text ({error.reason} at byte {error.start})",
                           item.span) from None
    except IsADirectoryError:
        raise ProgramError(f"`{item.file}` ({path}) is a directory, not a program", item.span) from None
    except OSError as error:
        raise ProgramError(f"cannot read `{item.file}` ({path}): {error.strerror}", item.span) from None


def compile_source(text: str, file: str, *, sets: Mapping[str, float] | None = None,
                   arrivals: int | None = None) -> tuple[ir.Program, SourceMap]:
    """The IR of the program ``text`` read from ``file`` (the name errors
    carry and ``use`` resolves against). ``sets`` replaces ``let`` constants
    by name before folding; ``arrivals`` replaces the run block's arrivals."""
    uses: dict[str, Span] = {}

    def parse_and_resolve() -> tuple[ast.Item, ...]:
        return resolve_uses(parse_text(text, file), {os.path.normpath(file)}, uses=uses)

    return compile_resolved(file, parse_and_resolve, uses, sets=sets, arrivals=arrivals)


def compile_items(items: tuple[ast.Item, ...], file: str, *, uses: Mapping[str, Span] | None = None,
                  sets: Mapping[str, float] | None = None,
                  arrivals: int | None = None) -> tuple[ir.Program, SourceMap]:
    """The IR of a program given as its items, each ``use`` already resolved
    (``resolve_uses``; ``uses``: the files it read, for the notes of an error
    in one): what ``compile_source`` does after parsing. The oracle harness
    builds its scenario programs as AST values (oracle/scenario.py)."""
    return compile_resolved(file, lambda: tuple(items), dict(uses or {}), sets=sets, arrivals=arrivals)


def compile_resolved(file: str, get_items, uses: dict[str, Span], *, sets: Mapping[str, float] | None,
                     arrivals: int | None) -> tuple[ir.Program, SourceMap]:
    """Desugar and lower the items ``get_items()`` returns (parsing and
    resolving, for ``compile_source``), with the recursion limit raised and
    an error in a used file noted at its uses."""
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, RECURSION_LIMIT))
    try:
        items = get_items()
        kernel, errors = desugar_recovering(file, items, sets)
        try:
            program, smap, lowering_errors = lower_recovering(kernel, arrivals)
        except ProgramError:
            if errors:  # a declaration the lowering refused: the desugaring's errors, as before
                raise_with_the_rests_errors(file, None, None, errors)
            raise
        smap = dataclasses.replace(smap, uses=uses)
        if errors and lowering_errors:  # the lowering's may be of the parts dropped (a name only they assigned)
            raise_with_the_rests_errors(file, None, None, errors)
        if errors or lowering_errors:
            raise_with_the_rests_errors(file, program, smap, errors + lowering_errors)
        return program, smap
    except ProgramError as error:  # one in a used file is located there and at the uses that read it
        add_use_notes(error, uses)
        raise
    except RecursionError:
        raise ProgramError("the program nests too deeply to compile: an expression or a block thousands of levels "
                           "deep (write a long sum with an aggregate, sum j in n (…))", file=file) from None
    finally:
        sys.setrecursionlimit(limit)


def raise_with_the_rests_errors(file: str, program: ir.Program | None, smap: SourceMap | None,
                                errors: list[ProgramError]) -> None:
    """Raise the front end's errors in statements, gauges and the like (``errors``) with the linker's errors
    of the rest of the program (issue 23: one error must not hide another): ``program`` is the IR without
    the parts that had one (a wrong statement dropped whole with its nested blocks, or `end;` in the
    lowering; a wrong gauge left out), and the linker's errors join the front end's in source order, at
    most one per place. Its warnings are not given: a program with errors is not run. ``program`` None:
    the errors alone."""
    from .link import link  # the linker runs on a compiled program; here, only on a program with errors

    log = ErrorLog([file])
    for error in errors:
        log.add(error)
    if program is not None:
        with log.recover():
            link(program, smap, errors_elsewhere=True)
    log.raise_errors()


def compile_file(path: str, *, sets: Mapping[str, float] | None = None,
                 arrivals: int | None = None) -> tuple[ir.Program, SourceMap]:
    """``compile_source`` of the file at ``path``."""
    return compile_source(read_text(path), path, sets=sets, arrivals=arrivals)
