"""The linker's checks on the IR: what seed 002 says does not link.

``link`` takes a program (compiled from source, or loaded from an IR file that
may come from anywhere) and either raises its errors (``ProgramError``, or
``ProgramErrors`` for several, in source order) or returns the warnings. A
check goes on after an error to the next statement, pool, stage or gauge, and
every check after the structure's runs, so that one error does not hide
another; at most one error is reported per place. The structure check comes
first, alone: the others need every index in range. The checks:

1. structure: every pool, stage, observation, attribute and block index in
   range, the blocks a tree, admit via a step stage (``structure``);
2. runs: a mode on a step stage and none elsewhere, ``growing`` on a step
   stage, a run over several stages on constant ps stages under a declared
   share (``structure``);
3. moments: each context variable only where it exists, hidden attributes
   only where the scheduler does not read, no draw in a key, gauges that read
   only the state (``moments``);
4. caching: ``cached`` and ``reuse`` only under a cache clause (``caching``);
5. lints: a set of live state reaching a hold's header, a constant guard
   (``lints``);
6. verdicts: index, guard, amount and cap properties over the attribute
   ranges, decided with Z3; an error when every admissible value trips it, a
   warning with a witness when some does (``ranges``, ``questions``,
   ``verdicts``, ``solver``);
7. a warning for ``self preemption continue`` where no run can preempt
   itself (``structure``).

docs/linking.md lists every message.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager

from .. import ir
from ..errors import ErrorLog, ProgramError, Warning_
from ..sourcemap import SourceMap
from .caching import check_caching
from .lints import check_lints
from .moments import check_moments
from .structure import check_runs, check_structure, list_inert_self_preemption


#: Expressions nest as deep as the program writes them: ``sum j in 4096 (e)``
#: is written out as 4096 nested additions, and the checks recurse over them.
RECURSION_LIMIT = 100_000


@contextmanager
def allow_deep_expressions() -> Iterator[None]:
    previous = sys.getrecursionlimit()
    sys.setrecursionlimit(max(previous, RECURSION_LIMIT))
    try:
        yield
    finally:
        sys.setrecursionlimit(previous)


def link(program: ir.Program, smap: SourceMap | None = None, verdicts: bool = True,
         errors_elsewhere: bool = False) -> list[Warning_]:
    """Raise the program's errors, every one; return the warnings. With
    ``verdicts`` false the range verdicts Z3 decides are left out (the oracle
    harness links one program with thousands of engines' constants, each
    linked with them in the tests: docs/linking.md). ``errors_elsewhere``: the
    caller has errors of the program already (the front end's, the run
    settings'); with those, or the linker's own, an error of the trace file
    the program reads joins them (``check_trace_file``)."""
    smap = smap if smap is not None else SourceMap()
    log = ErrorLog([smap.file] if smap.file else [])
    with allow_deep_expressions():
        local = ErrorLog(log.files)
        check_structure(program, smap, log, local)
        blocking = bool(log.errors)  # an index out of range: the other checks would read past it
        for error in local.errors:
            log.add(error)
        if blocking:
            log.raise_errors()
        check_runs(program, smap, log)
        check_moments(program, smap, log)
        check_caching(program, smap, log)
        check_lints(program, smap, log)
        warnings = list_inert_self_preemption(program, smap)
        if verdicts:
            from .verdicts import check_verdicts  # imported when asked for: the oracle's programs link without

            warnings += check_verdicts(program, smap, log)
        if log.errors or errors_elsewhere:
            check_trace_file(program, smap, log)
    log.raise_errors()
    return warnings


def check_trace_file(program: ir.Program, smap: SourceMap, log: ErrorLog) -> None:
    """An error of the trace file the program reads (a cell, a turn given twice: located in the file, with a
    note at the program's `trace`), beside the program's own errors (issue 23: one error must not hide
    another; a program with errors is not run, and the run is where a trace is read). A program with no
    other error is run, and the run reports the trace's error as it reads it (a RunError); a file that is
    missing or unreadable here is left to the run too (it may be read elsewhere)."""
    import os

    from ..errors import RunError
    from ..smallstep.workload import read_trace, trace_path

    if program.trace is None:
        return
    base = os.path.dirname(os.path.abspath(smap.file)) if smap.file else os.getcwd()
    path = trace_path(program.trace, base)  # as the run names it (smallstep.workload.load_trace)
    try:
        read_trace(path)
    except RunError as e:
        if e.span is None:
            return
        trace = smap.trace
        notes = (f"{trace.file}:{trace.line}:{trace.col}: the program reads the trace here",) if trace else ()
        log.add(ProgramError(e.message, span=e.span, notes=notes))
