"""Compiled programs kept on disk, so that a command run again on the same
program does not parse and compile it again (issue 22 §4: the parser, the
AST's classes and the compile are most of the start-up of `serq-ref oracle
replay` and of `check` or `run` on a small program).

``compile_source_cached(text, file, sets=..., arrivals=...)`` returns what
``semantics.compiler.compile_source`` returns for the same arguments, the
same values (tests/test_programcache.py holds them equal): from the cache when
an entry is there and still true, else by compiling, then stored.

Where: ``$XDG_CACHE_HOME/serq-ref/programs/`` (else ``~/.cache/serq-ref/
programs/``), beside lark's parser tables (semantics.syntax.parser), one file
per entry; ``SERQ_REF_PROGRAM_CACHE=0`` turns the cache off (every program
compiled, nothing read or written there).

An entry's name is the SHA-256 of everything its program depends on but the
files it uses: the cache's format, Python's version, serq-ref's own source
(where the ``semantics`` package is, and every ``.py`` and ``.lark`` file of
it by its size and modification time, as Python tells stale bytecode: an
edit of serq-ref's code misses every entry made before it),
lark's ``__init__.py`` (its version), the working directory (a relative
``use`` resolves against it), the file's name as given, its text, the
``--set`` values and the arrivals. The entry holds the files the program's
``use`` read (by their names as the compiler resolved them) with the
SHA-256 of each one's bytes, and the pickled IR program and SourceMap: it is
used only if every one of those files still has those bytes, so an edited
library is compiled afresh.

What is never stored: a program that does not compile (its errors are the
compiler's own, every time), one that draws ``~empirical`` (its values
come from a CSV file read when the program is compiled, which is not among
the files above), and one nested deeper than pickle recurses. An entry that cannot be read or unpickled is a miss. An
entry is written to a temporary file then renamed (two processes storing the
same entry write the same bytes), and the directory keeps the newest
``MAX_ENTRIES`` entries by their last use (an oracle campaign's thousands of programs do not
pile up). The cache holds pickles: like lark's own cache, it trusts the
user's cache directory.
"""

from __future__ import annotations

import hashlib
import os
import pickle
import sys
from typing import Mapping

#: Changed whenever what an entry holds changes meaning (then no older entry is read).
CACHE_FORMAT = "serq-ref program cache 1"
#: How many entries the directory keeps (those last used: a hit renews an entry's time).
MAX_ENTRIES = 256
PACKAGE = os.path.dirname(os.path.abspath(__file__))

_front_end_digest: bytes | None = None


def enabled() -> bool:
    return os.environ.get("SERQ_REF_PROGRAM_CACHE", "1") != "0"


def cache_directory() -> str:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "serq-ref", "programs")


def front_end_digest() -> bytes:
    """The SHA-256 of where the semantics package is and of each of its .py and .lark files' path, size and
    modification time (the rule by which Python itself tells stale bytecode: an edited file has a new time),
    and of lark's __init__.py (its version), computed once per process."""
    global _front_end_digest
    if _front_end_digest is None:
        stamps = [PACKAGE]
        for directory, subdirectories, files in os.walk(PACKAGE):
            subdirectories[:] = sorted(d for d in subdirectories if d != "__pycache__")
            for name in sorted(files):
                if name.endswith((".py", ".lark")):
                    path = os.path.join(directory, name)
                    status = os.stat(path)
                    stamps.append(f"{os.path.relpath(path, PACKAGE)} {status.st_size} {status.st_mtime_ns}")
        import importlib.util

        spec = importlib.util.find_spec("lark")
        if spec is not None and spec.origin:
            with open(spec.origin, "rb") as f:
                stamps.append(hashlib.sha256(f.read()).hexdigest())
        _front_end_digest = hashlib.sha256("\n".join(stamps).encode("utf-8")).digest()
    return _front_end_digest


def entry_name(text: str, file: str, sets: Mapping[str, float] | None, arrivals: int | None) -> str:
    key = repr((CACHE_FORMAT, sys.version, front_end_digest().hex(), os.getcwd(), file, text,
                sorted((sets or {}).items()), arrivals))
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


def file_digest(path: str) -> str | None:
    try:
        with open(path, "rb") as f:
            return hashlib.sha256(f.read()).hexdigest()
    except OSError:
        return None


def compile_source_cached(text: str, file: str, *, sets: Mapping[str, float] | None = None,
                          arrivals: int | None = None):
    """``compile_source(text, file, sets=sets, arrivals=arrivals)``, from the cache when it holds it
    (module docstring)."""
    try:
        path = os.path.join(cache_directory(), entry_name(text, file, sets, arrivals) + ".pickle") if enabled() else None
    except OSError:  # no working directory (removed under the process) or package to stat: no cache
        path = None
    if path is None:
        from .compiler import compile_source

        return compile_source(text, file, sets=sets, arrivals=arrivals)
    found = load_entry(path)
    if found is not None:
        return found
    from .compiler import compile_source

    program, smap = compile_source(text, file, sets=sets, arrivals=arrivals)  # an error is raised as ever
    store_entry(path, program, smap)
    return program, smap


def compile_file_cached(path: str, *, sets: Mapping[str, float] | None = None, arrivals: int | None = None):
    """``compile_file(path, ...)`` through the cache."""
    from .textfile import read_text

    return compile_source_cached(read_text(path), path, sets=sets, arrivals=arrivals)


def load_entry(path: str):
    """The (program, smap) of the entry at ``path`` if it is there, readable and every file it used still has
    the bytes it had; else None."""
    try:
        with open(path, "rb") as f:
            used, program, smap = pickle.load(f)
    except Exception:  # no entry, or one this code cannot read: a miss
        return None
    for used_path, digest in used:
        if file_digest(used_path) != digest:
            return None
    try:
        os.utime(path)  # newly used: the last the directory prunes
    except OSError:
        pass
    return program, smap


def store_entry(path: str, program, smap) -> None:
    """Store the entry (module docstring: what is never stored); a directory that cannot be written is no
    error, the program was compiled."""
    if draws_empirical(program):
        return
    used = []
    for used_path in smap.uses:
        digest = file_digest(used_path)
        if digest is None:
            return
        used.append((used_path, digest))
    try:  # a program nested deeper than the pickler recurses (a sum written out as thousands of additions)
        data = pickle.dumps((tuple(used), program, smap), protocol=pickle.HIGHEST_PROTOCOL)
    except (RecursionError, pickle.PicklingError, TypeError):  # or one holding a value pickle cannot write
        return
    directory = os.path.dirname(path)
    temporary = f"{path}.{os.getpid()}.tmp"
    try:
        os.makedirs(directory, exist_ok=True)
        with open(temporary, "wb") as f:
            f.write(data)
        os.replace(temporary, path)
        prune(directory)
    except OSError:
        try:
            os.unlink(temporary)
        except OSError:
            pass


def prune(directory: str) -> None:
    """Keep the newest MAX_ENTRIES entries of ``directory``."""
    entries = []
    for entry in os.scandir(directory):
        if entry.name.endswith(".pickle"):
            try:
                entries.append((entry.stat().st_mtime_ns, entry.name))
            except OSError:
                pass
    if len(entries) <= MAX_ENTRIES:
        return
    entries.sort(reverse=True)
    for _, name in entries[MAX_ENTRIES:]:
        try:
            os.unlink(os.path.join(directory, name))
        except OSError:
            pass


def draws_empirical(program) -> bool:
    """Whether any node of the IR ``program`` is a ``~empirical`` draw."""
    from . import ir

    return any(isinstance(node, ir.Sample) and node.dist == "Empirical" for node in ir.walk(program))
