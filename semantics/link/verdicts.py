"""Facts about every admissible value, decided with Z3 (check 8).

What is asked (per site, a property a run would trip on: a family index, a
guard, an amount, a hold within its pool's cap) and the three answers are
``questions``'s; this module decides them.

The site's expression is encoded over the attribute ranges of ``ranges`` (one
variable per attribute, within its interval, whole when the range is), with
real arithmetic: a conditional and min/max as If, floor/ceil as an integer
within one of its argument, a draw as a fresh value in its support, and every
observable (used(p), cachedin(p), budget_left(s), a context variable) and
every function Z3 does not know (sqrt, exp, ln, pow) as a fresh value, non
negative where it cannot be negative (docs/arithmetic.md says where these
reals differ from a run's floats), at most the pool's cap where that is
known. If the property fails for no admissible value the site is fine; if it
holds for every one (the negation is unsatisfiable) the program is wrong and
linking fails; if only for some, a warning names a witness from the model.

Each query has a deterministic resource limit (``rlimit``) and a time limit;
an unknown answer is no finding, so a verdict never depends on the machine.

A question the attribute ranges settle by themselves (the range of the site's
expression, ``ranges.RangeEvaluator``, has no bad value: a work within
[0, inf), a guard within {0, 1}) is not asked of Z3: the ranges
over-approximate what a run computes, so Z3 would answer "never" too. The
Z3 side (``solver``) is imported only for the questions left.
"""

from __future__ import annotations

import math

from .. import ir
from ..errors import ErrorLog, Warning_
from ..sourcemap import SourceMap
from .constants import evaluate_constant
from .names import format_number, locate_statement, make_error, make_warning, show_stage_ref
from .questions import ALWAYS, SOMETIMES, Question, Verdict, list_questions
from .ranges import Interval, RangeEvaluator, compute_attribute_ranges, read_trace_columns
from .walk import strip_cost, visit_session


def phrase_finding(question: Question, verdict: Verdict) -> str:
    """The message of a finding: ALWAYS is an error, SOMETIMES a warning."""
    what, witness, always = question.what, verdict.witness, verdict.answer == ALWAYS
    last = format_number(question.limit)
    if question.fault == "index":
        if always:
            return f"{what} is never a member index 0..{last} (e.g. {witness})"
        return f"{what} can be {witness}, which is not a member index 0..{last}"
    if question.fault == "guard":
        if always:
            return f"{what} is never 0 or 1 (e.g. {witness}); a guard is a test, and any other value is a run-time error"
        return f"{what} can be {witness}, which is neither 0 nor 1 (a run-time error); write `branch with (p)` for a draw"
    if question.fault == "domain":
        says = question.domain.says
        after = " (branch with (p) draws ~bernoulli(p))" if what.startswith("~bernoulli") else ""
        if always:
            return f"{what}{after} is never {says} (e.g. {witness}): every run that draws it stops with a run-time error"
        return f"{what}{after} can be {witness}, which is not {says} (a run-time error where it is drawn)"
    if question.fault == "negative":
        if always:
            return f"{what} is negative for every admissible value (e.g. {witness})"
        return f"{what} can be negative: {witness}"
    if always:
        return f"{what} can never fit in the pool, whose cap is {last} (e.g. {witness}): every session would be rejected"
    return f"{what} can be above the pool's cap {last}: {witness}; such a session is rejected"


def check_constant_work(program: ir.Program, smap: SourceMap, log: ErrorLog) -> None:
    """A run whose work is a constant inf or NaN (``run g (1 / z)`` with
    ``let z = 0``): its job would never finish, or the run stops at it.
    (Reals have neither, so the questions below cannot ask it of Z3; a work
    computed at run time is refused there, as a RunError naming the run.)"""
    for visit in visit_session(program):
        if isinstance(visit.stmt, ir.Run):
            work = evaluate_constant(visit.stmt.work)
            if work is not None and (work == math.inf or work != work):
                what = f"the work of `run {show_stage_ref(program, visit.stmt.stage)}`"
                why = ("inf: the job would hold its stage for ever and the session never finish" if work == math.inf
                       else "NaN, which is no amount of work")
                log.add(make_error(smap, locate_statement(program, smap, visit.block, visit.index),
                                   f"{what} is {why}"))


def settle_by_ranges(question: Question, interval: Interval | None) -> bool:
    """Whether ``interval``, the range of the question's expression, holds no
    value with the fault, so that Z3 need not be asked."""
    if interval is None:
        return False
    if question.fault == "index":
        return interval.whole and interval.low >= 0 and interval.high <= question.limit
    if question.fault == "guard":
        return interval.whole and interval.low >= 0 and interval.high <= 1
    if question.fault == "negative":
        return interval.low >= 0
    if question.fault == "domain":
        domain = question.domain
        low_ok = interval.low > domain.low if domain.above else interval.low >= domain.low
        return low_ok and interval.high <= domain.high and (interval.whole or not domain.whole)
    return interval.high <= question.limit


def list_entered_loops(program: ir.Program, path) -> list[tuple[int, int]]:
    """The loops (and whiles) a path enters, by their (block, index), outermost first."""
    return [(block, index) for block, index in path.steps[:-1]
            if isinstance(program.blocks[block][index], (ir.Loop, ir.While))]


def check_verdicts(program: ir.Program, smap: SourceMap, log: ErrorLog) -> list[Warning_]:
    """An error (in ``log``) for each property that holds for every admissible
    value; a warning, returned, for each that holds for some."""
    check_constant_work(program, smap, log)
    columns = read_trace_columns(program, smap)
    ranges = compute_attribute_ranges(program, columns)
    evaluator = RangeEvaluator(program, list(ranges))
    warnings: list[Warning_] = []
    heads = None
    faulty: set[tuple[int, int]] = set()  # the statements found to fault in every run (solver.Encoder.faulty)
    for question in list_questions(program, smap):
        expr = strip_cost(question.expr)
        interval = evaluator.evaluate(expr)
        if settle_by_ranges(question, interval):
            continue
        from .solver import Encoder, decide, decide_by_iterations, formulate

        def encode(loop_heads: dict | None, iterations: dict | None = None):
            encoder = Encoder(program, ranges, columns, loop_heads, iterations, smap.holes, frozenset(faulty))
            if question.path is not None:
                encoder.walk(question.path)
            term = encoder.encode(expr)
            return encoder, term, formulate(question, encoder, term, interval is not None and interval.whole)

        def ask(loop_heads: dict | None):
            return decide(*encode(loop_heads))

        verdict = ask(None)
        if (verdict.answer == ALWAYS or (verdict.answer == SOMETIMES and question.warns)) and question.path is not None:
            # asked again with what holds at the heads of the loops on the way (loops.py): a witness no run
            # reaches there goes (issue 23); only now, since the invariants slow Z3 on every question
            if heads is None:
                from .loops import compute_loop_heads

                heads = compute_loop_heads(program, ranges, columns, smap.holes)
            if heads:
                verdict = ask(heads)
            loops = list_entered_loops(program, question.path)
            if loops and verdict.answer == SOMETIMES and question.warns:
                # and again in the first iteration and in the later ones apart (solver.Encoder.enter_loop):
                # a witness only a state after an iteration no run passes could give goes (issue 23)
                verdict = decide_by_iterations(loops, lambda iterations: encode(heads, iterations)) or verdict
        if verdict.answer == ALWAYS:
            log.add(make_error(smap, question.site, phrase_finding(question, verdict)))
            if question.path is not None:
                faulty.add(question.path.steps[-1])
        if verdict.answer == SOMETIMES and question.warns:
            warnings.append(make_warning(smap, question.site, phrase_finding(question, verdict)))
    return warnings
