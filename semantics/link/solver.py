"""The Z3 side of the verdicts (check 8): expressions as Z3 terms over the
attribute ranges, and the decision of a property for every, some or no
admissible value.

Imported only when a question is left that the attribute ranges alone do not
settle (``verdicts.settle_by_ranges``): z3 takes a tenth of a second to
import, and most programs' questions are settled without it.

Each query has a deterministic resource limit (``rlimit``) and a time limit;
an unknown answer is no finding, so a verdict never depends on the machine.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterator
from fractions import Fraction

import z3

from .. import ir
from .constants import evaluate_constant
from .names import name_attribute, show_expr
from .paths import HOLD, TURN, Path, find_restartable_holds, list_assigned, list_assigned_slots
from .questions import ALWAYS, NEVER, SOMETIMES, Domain, Question, Verdict, list_draw_questions, list_expression_refs
from .walk import list_parts, list_statement_refs
from .ranges import EVERYTHING, Interval, RangeEvaluator, start_turn

#: Z3's deterministic work limit per query, and a wall-clock backstop (ms).
RESOURCE_LIMIT = 2_000_000
TIME_LIMIT_MS = 2_000
#: An infinite constant is encoded as a value above every finite one the program writes.
BEYOND_FINITE = 10**18


def make_constant(x: float, context: z3.Context) -> z3.ArithRef:
    fraction = Fraction(x)
    return z3.Q(fraction.numerator, fraction.denominator, context)


#: Which iteration of a loop a site is asked in (``Encoder.iterations``).
FIRST = "first"
LATER = "later"

#: The greatest whole exponent a power is encoded as a product for (``Encoder.encode_power``).
MAX_PRODUCT_EXPONENT = 4


class Encoder:
    """Z3 terms for expressions over the attribute ranges, with the side
    constraints the terms need; one encoder, with a Z3 context of its own,
    per query (Z3's answers depend on what its context saw before, so a
    shared one would let one query's witness depend on the queries before it)."""

    def __init__(self, program: ir.Program, ranges: tuple[Interval, ...],
                 columns: dict[int, Interval] | None = None, heads: dict | None = None,
                 iterations: dict[tuple[int, int], str] | None = None,
                 holes: frozenset[tuple[int, int]] = frozenset(), faulty: frozenset[tuple[int, int]] = frozenset()):
        self.program = program
        #: statements found to fault in every run that comes to them (a link error each): the errors after
        #: one are looked for as if it were mended, so it is passed without its fault's constraints (issue
        #: 23: one error must not hide another)
        self.faulty = faulty
        #: statements the lowering could not lower (SourceMap.holes): passed, any attribute may have changed
        self.holes = holes
        self.ranges = ranges
        #: each loop's head invariant (loops.py), by the loop statement's (block, index)
        self.heads = heads or {}
        #: for a loop the path enters, by its (block, index): which of its iterations the site is asked in
        #: (``enter_loop``); a loop not named: any, as its head says
        self.iterations = iterations or {}
        #: the holds a preemption can run again (paths.find_restartable_holds), found when first asked
        self.restartable: frozenset[tuple[int, int]] | None = None
        #: the trace's columns as a `turn;` loads them (the file's values), by slot
        self.columns = columns or {}
        self.context = z3.Context()
        self.constraints: list[z3.BoolRef] = []
        #: what holds of the quantities whatever the path (their ranges: ``bound``)
        self.facts: list[z3.BoolRef] = []
        #: the quantities a witness names, in the order the expression reads them
        self.named: dict[str, z3.ArithRef] = {}
        self.observables: dict[object, z3.ArithRef] = {}
        self.count = 0
        #: the attributes the path to the site defines (``walk``): slot -> term
        self.state: dict[int, z3.ArithRef] = {}
        #: which moment an observable or context variable is read at: 0 the site's, then one per
        #: statement of the path (an observable read earlier is another quantity)
        self.instant = 0
        #: the quantities the site's own expression reads (ids): a witness names them
        self.site_reads: set[int] = set()
        #: when a term is NaN, by the term's id (with the term, which keeps its id): a term not here is a
        #: number. A run's float is NaN after 0 / 0, sqrt or ln of a negative number, or an operation on a
        #: NaN (docs/arithmetic.md); a term's real value then means nothing (issue 23: `branch (calls /
        #: 0 * 2)` with calls 0 stops every run, and what follows it was warned of as if it passed)
        self.nans: dict[int, tuple[z3.ExprRef, z3.BoolRef]] = {}
        #: the constants made so far, by value (one term each: making one is most of encoding a path)
        self.constants: dict[float, z3.ArithRef] = {}

    def is_nan(self, term: z3.ExprRef) -> z3.BoolRef:
        """When ``term`` is NaN (never: false)."""
        found = self.nans.get(term.get_id())
        return found[1] if found is not None else z3.BoolVal(False, self.context)

    def mark_nan(self, term: z3.ArithRef, when: z3.BoolRef) -> z3.ArithRef:
        """``term``, NaN when ``when`` holds."""
        if not z3.is_false(when):
            self.nans[term.get_id()] = (term, when)
        return term

    def either_nan(self, *terms: z3.ArithRef) -> z3.BoolRef:
        """When any of ``terms`` is NaN (false, itself, when none can be)."""
        flags = [flag for flag in map(self.is_nan, terms) if not z3.is_false(flag)]
        if not flags:
            return z3.BoolVal(False, self.context)
        return flags[0] if len(flags) == 1 else z3.Or(*flags)

    def choose_nan(self, test: z3.BoolRef, a: z3.ArithRef, b: z3.ArithRef) -> z3.BoolRef:
        """When ``If(test, a, b)`` is NaN."""
        x, y = self.is_nan(a), self.is_nan(b)
        if z3.is_false(x) and z3.is_false(y):
            return x
        return z3.If(test, x, y)

    def is_true(self, term: z3.ArithRef) -> z3.BoolRef:
        """``term`` as a test: true when it is not 0 (NaN is true: smallstep/values.py, ``x != 0``)."""
        nan = self.is_nan(term)
        return term != 0 if z3.is_false(nan) else z3.Or(nan, term != 0)

    def is_number(self, term: z3.ArithRef) -> z3.BoolRef:
        return z3.Not(self.is_nan(term))

    def make_fresh(self, stem: str) -> z3.ArithRef:
        self.count += 1
        return z3.Real(f"{stem}!{self.count}", self.context)

    def make_constant(self, x: float) -> z3.ArithRef:
        found = self.constants.get(x)
        if found is None:
            found = self.constants[x] = make_constant(x, self.context)
        return found

    def bound(self, term: z3.ArithRef, interval: Interval) -> None:
        """``term`` within ``interval``: a fact about a quantity (an attribute's range), true whichever
        block of a branch passed made it (``pass_branch``), so among the facts, not a block's constraints."""
        if math.isfinite(interval.low):
            self.facts.append(term >= self.make_constant(interval.low))
        if math.isfinite(interval.high):
            self.facts.append(term <= self.make_constant(interval.high))
        if interval.whole:
            self.facts.append(z3.IsInt(term))

    def name_quantity(self, key: ir.Expr, shown: str, interval: Interval) -> z3.ArithRef:
        """The one variable of an attribute, context variable or observable in
        this query (an observable or context variable: at this instant)."""
        if not isinstance(key, ir.Attr):
            key = (self.instant, key)
            if self.instant:
                shown = f"{shown} (read earlier)"
        if key not in self.observables:
            self.observables[key] = self.make_named(shown, interval)
        if self.instant == 0:
            self.site_reads.add(self.observables[key].get_id())
        return self.observables[key]

    def make_named(self, shown: str, interval: Interval) -> z3.ArithRef:
        """A new quantity a witness may name (`x`, `x`', … when the path
        forgot an earlier value of the same attribute)."""
        while shown in self.named:
            shown += "'"
        term = z3.Real(shown, self.context)
        self.named[shown] = term
        self.bound(term, interval)
        return term

    # ---------------------------------------------------------------- the path

    def walk(self, path: Path) -> None:
        """What the semantics guarantees on the way to the site (paths.py):
        definitions, guards, `cached` within the hold's reuse."""
        program = self.program
        if path.steps[0][0] in (program.init, program.session):
            # a session arrives with turn_no 0 (or an explicit session's), and only `turn;` changes it (the
            # program may not assign it): `run h[turn_no + 1]` before the first turn is h[1] (issue 23)
            self.state[program.slot_turn] = self.make_named(f"`{name_attribute(program, program.slot_turn)}`",
                                                            start_turn(program))
        if path.after_init:
            for stmt in program.blocks[program.init]:
                self.pass_statement(stmt)
        for level, (block, index) in enumerate(path.steps):
            stmts = program.blocks[block]
            for at, stmt in enumerate(stmts[:index]):
                self.pass_statement(stmt, (block, at))
            stmt = stmts[index]
            if level + 1 < len(path.steps):
                self.enter(stmt, path.steps[level + 1][0], (block, index))
            elif isinstance(stmt, ir.Hold):  # its header is read at every admission, a preempted body's again
                self.forget(self.assigned_again(stmt, (block, index)) | {self.program.slot_computed})
        self.instant = 0

    def next_instant(self) -> None:
        self.count += 1
        self.instant = self.count

    def pass_statement(self, stmt: ir.Stmt, at: tuple[int, int] | None = None) -> bool:
        """A statement the session has passed on the way to the site (at ``at``, its (block, index));
        whether a run can go on past it (not after `end;`, nor a branch both of whose blocks end).

        A branch passed is the run of one of its blocks (issue 23: forgetting what either assigns gave
        witnesses no run reaches, `z` and `serial` apart where the block not taken had left `z` as
        `serial - 1`): each block's statements are passed in turn from the state before it, their
        constraints holding under its guard value, and each attribute either assigns is, after the
        branch, the one block's value or the other's by the guard. A hold passed is its body passed
        once from the hold's start (a restarted hold's last run of its body is a run of it from its
        header's values: ``enter_hold``), then `cached` and `computed` forgotten."""
        program = self.program
        self.next_instant()
        if at is not None and at in self.holes:  # a statement with an error: what it would do is not known
            self.forget(set(range(len(program.attrs))) | {TURN, HOLD})
            return True
        if at not in self.faulty:
            self.pass_without_fault(stmt)
        if isinstance(stmt, ir.End):
            self.constraints.append(z3.BoolVal(False, self.context))
            return False
        if isinstance(stmt, ir.Set):  # a quantity of its own, named as the attribute, so a witness can say it
            value = self.encode(stmt.expr)
            named = self.make_named(f"`{name_attribute(program, stmt.slot)}`", EVERYTHING)
            self.constraints.append(named == value)
            self.state[stmt.slot] = self.mark_nan(named, self.is_nan(value))
        elif isinstance(stmt, ir.Choose):
            self.forget({stmt.var})
        elif isinstance(stmt, ir.Turn):
            self.pass_turn()
        elif isinstance(stmt, ir.Hold):
            self.enter_hold(stmt, at)
            if not self.pass_block(stmt.body):
                return False
            self.forget({HOLD})
        elif isinstance(stmt, ir.Branch):
            return self.pass_branch(stmt)
        elif isinstance(stmt, (ir.Loop, ir.While)):  # a while is left at its head
            self.forget_to_the_head(list_assigned(program, stmt.block), at)
            if isinstance(stmt, ir.Loop):  # left only by `end;`
                self.constraints.append(z3.BoolVal(False, self.context))
                return False
            self.constraints.append(self.encode_test(stmt.guard, False))
        return True

    def pass_block(self, block: int) -> bool:
        """Every statement of ``block`` passed in order; whether a run can go on past its end."""
        for index, stmt in enumerate(self.program.blocks[block]):
            if not self.pass_statement(stmt, (block, index)):
                return False
        return True

    def pass_branch(self, stmt: ir.Branch) -> bool:
        guard = self.encode(stmt.guard)
        before, outer = dict(self.state), self.constraints
        sides = []
        for child, value in ((stmt.then_block, 1), (stmt.else_block, 0)):
            self.state, self.constraints = dict(before), []
            goes_on = self.pass_block(child)
            sides.append((guard == value, goes_on, self.state, self.constraints))
        self.constraints = outer
        for taken, _, _, inner in sides:
            if inner:
                self.constraints.append(z3.Implies(taken, z3.And(*inner)))
        live = [side for side in sides if side[1]]
        if not live:
            self.state = before
            self.constraints.append(z3.BoolVal(False, self.context))
            return False
        if len(live) == 1:
            self.constraints.append(live[0][0])
            self.state = live[0][2]
            return True
        (_, _, then, _), (_, _, otherwise, _) = sides
        merged = dict(before)
        for slot in sorted(set(then) | set(otherwise)):
            a, b = then.get(slot), otherwise.get(slot)
            if a is not None and b is not None and a.eq(b):
                merged[slot] = a
                continue
            self.state = before  # a side that did not assign the slot has it as it was
            a = a if a is not None else self.encode(ir.Attr(slot))
            b = b if b is not None else self.encode(ir.Attr(slot))
            named = self.make_named(f"`{name_attribute(self.program, slot)}`", EVERYTHING)
            self.constraints.append(named == z3.If(guard == 1, a, b))
            merged[slot] = self.mark_nan(named, self.choose_nan(guard == 1, a, b))
        self.state = merged
        return True

    def pass_without_fault(self, stmt: ir.Stmt) -> None:
        """A run that goes on past ``stmt`` found its family indices members, its guard 0 or 1 and its
        draws' arguments in their domains there (anything else stops the run: seed 002 §3 Branching, a
        family index, arithmetic.describe_draw_problem): issue 23, a witness at a
        later statement that needs an earlier one to have stopped the run is no run's."""
        refs = list_statement_refs(stmt) + list(list_expression_refs([p.expr for p in list_parts(stmt)]))
        for _, ref in refs:
            if ref.index is not None:
                index = self.encode(ref.index)
                self.constraints += [self.is_number(index), index >= 0, index <= self.make_constant(ref.count - 1),
                                     z3.IsInt(index)]
        if isinstance(stmt, (ir.Branch, ir.While)):
            guard = self.encode(stmt.guard)
            self.constraints += [self.is_number(guard), z3.Or(guard == 0, guard == 1)]
        for question in list_draw_questions(None, [p.expr for p in list_parts(stmt)]):  # its draws' arguments too
            tests = [self.encode_test(test, truth) for test, truth in question.conditions]
            within = encode_domain(self, question.domain, self.encode(question.expr))
            self.constraints.append(z3.Implies(z3.And(*tests), within) if tests else within)

    def forget_to_the_head(self, assigned: set[int | str], at: tuple[int, int] | None) -> None:
        """``forget``, then what holds at the head of the loop at ``at`` (loops.py) of each attribute
        forgotten: an earlier iteration may have changed it, but only within the loop's invariant."""
        before = dict(self.state)
        self.forget(assigned)
        head = self.heads.get(at)
        if head is None:
            return
        forgotten = set()
        for slot, term in self.state.items():
            if before.get(slot) is term:
                continue  # not forgotten: the path's own value
            forgotten.add(slot)
            interval, known = head[slot], self.ranges[slot]
            if interval.low > known.low and math.isfinite(interval.low):  # only what the range does not say
                self.constraints.append(term >= self.make_constant(interval.low))
            if interval.high < known.high and math.isfinite(interval.high):
                self.constraints.append(term <= self.make_constant(interval.high))
            values = head.values_of(slot)
            if values is not None:  # one of a few values (loops.State.values)
                self.constraints.append(z3.Or(*[term == self.make_constant(v) for v in sorted(values)]))
        # x = y + c at the head, for an x or y forgotten (the other, not assigned in the body, is what it
        # was at the loop's entry): reals, as every `set` on the path is encoded (docs/arithmetic.md)
        for x, y, c in sorted(head.relations):
            if x in forgotten or y in forgotten:
                self.constraints.append(self.encode(ir.Attr(x)) == self.encode(ir.Attr(y)) + self.make_constant(c))

    def pass_turn(self) -> None:
        """`turn;`: turn_no and the trace's columns change, then the turn block runs."""
        program = self.program
        before = self.encode(ir.Attr(program.slot_turn))
        self.forget({program.slot_turn})
        self.constraints.append(self.state[program.slot_turn] == before + 1)  # session/turn: turn_no + 1
        for slot, interval in self.columns.items():
            self.state[slot] = self.make_named(f"`{name_attribute(program, slot)}`", interval)
        if program.trace is not None:
            self.forget({program.slot_more} | ({program.slot_new, program.slot_out, program.slot_think,
                                                program.slot_forced} - set(self.columns)))
        for stmt in program.blocks[program.turn]:
            self.pass_statement(stmt)

    def enter(self, stmt: ir.Stmt, child: int, at: tuple[int, int] | None = None) -> None:
        """The site is inside ``stmt``'s block ``child`` (``stmt`` at ``at``, its (block, index))."""
        program = self.program
        self.next_instant()
        if isinstance(stmt, ir.Hold) and at not in self.faulty:  # admitted: its header's indices were members
            self.pass_without_fault(stmt)
        if isinstance(stmt, ir.Branch):
            guard = self.encode(stmt.guard)  # (a NaN guard stops the run)
            self.constraints += [self.is_number(guard), guard == (1 if child == stmt.then_block else 0)]
        elif isinstance(stmt, (ir.Loop, ir.While)):
            self.enter_loop(stmt, at)
        elif isinstance(stmt, ir.Hold):
            self.enter_hold(stmt, at)

    def enter_loop(self, stmt: ir.Loop | ir.While, at: tuple[int, int] | None) -> None:
        """The site is in an iteration of the loop at ``at``. ``iterations`` may say which: (FIRST, n), the
        n+1-th iteration, from the state the path brought (nothing forgotten) after n whole iterations
        passed; (LATER, n), any iteration after the n-th, from a state the head's invariant allows (an
        earlier iteration's) after n whole iterations passed. An iteration passed is its whole body,
        every statement of it without a fault and none ending the session (issue 23: a witness only a
        state after an iteration that stops every run could give, `h[next]` with next = 3 where the
        second iteration's guard is 4 in every run). (FIRST, 0) .. (FIRST, n - 1) and (LATER, n) cover
        every iteration. Not said: any iteration, as the head's invariant allows."""
        program = self.program
        which, passed = self.iterations.get(at, (None, 0))
        if which != FIRST:
            self.forget_to_the_head(list_assigned(program, stmt.block), at)
        for _ in range(passed):
            if isinstance(stmt, ir.While):
                self.constraints.append(self.encode_test(stmt.guard, True))
            if not self.pass_block(stmt.block):
                self.constraints.append(z3.BoolVal(False, self.context))
            self.next_instant()
        if isinstance(stmt, ir.While):
            self.constraints.append(self.encode_test(stmt.guard, True))

    def enter_hold(self, stmt: ir.Hold, at: tuple[int, int] | None) -> None:
        """The start of a hold's body: what a preemption's earlier run of it assigned forgotten (when
        one can), `computed` forgotten, `cached` within the hold's reuse."""
        program = self.program
        self.forget(self.assigned_again(stmt, at) | {program.slot_computed})
        slot = program.slot_cached
        if stmt.cache is None:  # a hold without cache consumes nothing (seed 002 §2, Built-in attributes)
            self.state[slot] = self.make_constant(0)
            return
        cached = self.make_named(f"`{name_attribute(program, slot)}`", self.ranges[slot])
        self.constraints.append(cached >= 0)
        if stmt.reuse is not None:  # at most reuse units are consumed (pool/consume)
            reuse = self.encode(stmt.reuse)
            self.constraints.append(cached <= z3.If(reuse > 0, reuse, self.make_constant(0)))
        self.state[slot] = cached

    def assigned_again(self, stmt: ir.Hold, at: tuple[int, int] | None) -> set[int | str]:
        """What a hold's body assigns, when a preemption can run the hold again (paths.
        find_restartable_holds): at its header and its body's start, a value from an earlier run of the
        body; nothing when none can."""
        if self.restartable is None:
            self.restartable = find_restartable_holds(self.program)
        if at is not None and at not in self.restartable:
            return set()
        return list_assigned(self.program, stmt.body)

    def forget(self, assigned: set[int | str]) -> None:
        """What the path cannot know any more: each attribute back to its range."""
        program = self.program
        slots = {a for a in assigned if isinstance(a, int)}
        if TURN in assigned:
            slots |= {program.slot_turn} | list_assigned_slots(program, program.turn)
            if program.trace is not None:
                slots |= {program.slot_new, program.slot_out, program.slot_think, program.slot_more,
                          program.slot_forced}
        if HOLD in assigned:
            slots |= {program.slot_cached, program.slot_computed}
        for slot in sorted(slots):
            fresh = self.make_named(f"`{name_attribute(program, slot)}`", self.ranges[slot])
            if TURN in assigned and slot in self.columns:
                # a trace column is what it was, or what a `turn;` on the way loaded from the file
                interval = self.columns[slot]
                old = self.encode(ir.Attr(slot))
                self.constraints.append(z3.Or(fresh == old, z3.And(fresh >= self.make_constant(interval.low),
                                                                   fresh <= self.make_constant(interval.high))))
            self.state[slot] = fresh

    def encode(self, e: ir.Expr) -> z3.ArithRef:
        if isinstance(e, ir.Num):
            if math.isinf(e.value):
                beyond = self.make_fresh("inf")
                self.constraints.append(beyond > BEYOND_FINITE)
                return beyond if e.value > 0 else -beyond
            if math.isnan(e.value):
                nan = self.make_fresh("nan")
                return self.mark_nan(nan, z3.BoolVal(True, self.context))
            return self.make_constant(e.value)
        if isinstance(e, ir.Attr):
            if e.slot in self.state:
                if self.instant == 0:
                    self.site_reads.add(self.state[e.slot].get_id())
                return self.state[e.slot]
            return self.name_quantity(e, f"`{name_attribute(self.program, e.slot)}`", self.ranges[e.slot])
        if isinstance(e, ir.Ctx):
            interval = Interval(0.0, 1.0, True) if e.var == "Decoding" else Interval(0.0, math.inf, False)
            return self.name_quantity(e, f"`{ir.CONTEXT_VARIABLES[e.var]}`", interval)
        if isinstance(e, ir.Cost):
            return self.encode(e.expr)
        if isinstance(e, ir.Sample):
            return self.encode_sample(e)
        if isinstance(e, ir.Call):
            return self.encode_call(e)
        if isinstance(e, ir.Unary):
            a = self.encode(e.operand)
            if e.op == "Neg":
                return self.mark_nan(-a, self.is_nan(a))
            return z3.If(self.is_true(a), self.make_constant(0), self.make_constant(1))  # (!NaN is 0)
        if isinstance(e, ir.Binary):
            return self.encode_binary(e)
        assert isinstance(e, ir.Cond)
        test = self.is_true(self.encode(e.test))
        a, b = self.encode(e.then), self.encode(e.otherwise)
        return self.mark_nan(z3.If(test, a, b), self.choose_nan(test, a, b))

    def encode_test(self, e: ir.Expr, truth: bool) -> z3.BoolRef:
        """That ``e``, as a test, is true (``truth``) or false."""
        test = self.is_true(self.encode(e))
        return test if truth else z3.Not(test)

    def encode_binary(self, e: ir.Binary) -> z3.ArithRef:
        if e.op == "Pow":
            return self.encode_power(e, e.left, e.right)
        a, b = self.encode(e.left), self.encode(e.right)
        either = self.either_nan(a, b)
        if e.op in ("And", "Or"):  # never NaN: a NaN operand is true
            both = z3.And if e.op == "And" else z3.Or
            return z3.If(both(self.is_true(a), self.is_true(b)), self.make_constant(1), self.make_constant(0))
        if e.op in ("Lt", "Le", "Gt", "Ge", "Eq", "Ne"):  # never NaN: a comparison with NaN is false (!= true)
            tests = {"Lt": lambda: a < b, "Le": lambda: a <= b, "Gt": lambda: a > b, "Ge": lambda: a >= b,
                     "Eq": lambda: a == b, "Ne": lambda: a != b}
            holds = tests[e.op]() if z3.is_false(either) else \
                z3.If(either, z3.BoolVal(e.op == "Ne", self.context), tests[e.op]())
            return z3.If(holds, self.make_constant(1), self.make_constant(0))
        if e.op == "Div":
            # a float division by 0 is ±inf (or NaN for 0 / 0), as IEEE 754 says (docs/arithmetic.md); Z3's
            # a / 0 is any value, which gave witnesses no run reaches ("the work can be negative: -1 when
            # `z` = 0" for 1 / z)
            beyond = self.make_fresh("inf")
            self.constraints.append(beyond > BEYOND_FINITE)
            zero = self.make_constant(0)
            by_zero = z3.If(a > zero, beyond, z3.If(a < zero, -beyond, self.make_fresh("nan")))
            zero_by_zero = z3.And(a == zero, b == zero)
            return self.mark_nan(z3.If(b == zero, by_zero, a / b),
                                 zero_by_zero if z3.is_false(either) else z3.Or(either, zero_by_zero))
        arithmetic = {"Add": lambda: a + b, "Sub": lambda: a - b, "Mul": lambda: a * b}
        return self.mark_nan(arithmetic[e.op](), either)

    def encode_sample(self, e: ir.Sample) -> z3.ArithRef:
        if e.dist == "Empirical":  # one of the column's values (numbers): between the least and the greatest
            draw = self.make_fresh(ir.DISTRIBUTIONS[e.dist][0])
            values = [a.value for a in e.args]
            self.constraints.append(z3.And(draw >= self.make_constant(min(values)),
                                           draw <= self.make_constant(max(values))))
            return draw
        args = [self.encode(a) for a in e.args]  # before the draw's own variable, as always (Z3's witnesses)
        draw = self.make_fresh(ir.DISTRIBUTIONS[e.dist][0])
        if e.dist == "Det":
            self.constraints.append(draw == args[0])
        elif e.dist == "Uniform":
            self.constraints.append(z3.Or(z3.And(args[0] <= draw, draw <= args[1]), z3.And(args[1] <= draw, draw <= args[0])))
        elif e.dist == "Bernoulli":  # 1 when a uniform [0, 1) draw is below p: so only if p > 0; 0 only if p < 1
            self.constraints.append(z3.Or(z3.And(draw == 1, args[0] > 0), z3.And(draw == 0, args[0] < 1)))
        elif e.dist == "Normal":
            pass  # any real number (docs/design/draws.md)
        else:
            self.constraints.append(draw >= 0)
        return draw

    def encode_power(self, e: ir.Expr, base: ir.Expr, exponent: ir.Expr) -> z3.ArithRef:
        """A power by a whole constant exponent from 1 to MAX_PRODUCT_EXPONENT is a product of its base
        (issue 23: `h[pow(next - 2, 2)]` with next = 1 was any whole number in [0, inf) and warned of 2,
        which no run reaches); any other power as encode_constant_or_fresh says."""
        n = evaluate_constant(exponent)
        # the bounds first: an infinite or NaN exponent (`now ^ -inf`) has no floor
        if evaluate_constant(e) is None and n is not None and 1 <= n <= MAX_PRODUCT_EXPONENT and n == math.floor(n):
            a = self.encode(base)
            product = a
            for _ in range(int(n) - 1):
                product = product * a
            return self.mark_nan(product, self.is_nan(a))
        return self.encode_constant_or_fresh(e, "pow")

    def encode_constant_or_fresh(self, e: ir.Expr, stem: str) -> z3.ArithRef:
        """A function Z3 does not model (pow, ln): its value when its operands are constants (issue 23:
        `set a = pow(1, 2)` was any number, and a hold of `a + 1` warned of -1), else a fresh quantity
        within the expression's range over the attribute ranges (ranges.py: ln is increasing)."""
        value = evaluate_constant(e)
        if value is not None and math.isfinite(value):
            return self.make_constant(value)
        fresh = self.make_fresh(stem)
        # NaN or not as it may (a negative base to a fraction, ln of a negative number, an operand's NaN)
        self.mark_nan(fresh, z3.Bool(f"{stem}!{self.count}!nan", self.context))
        interval = RangeEvaluator(self.program, list(self.ranges)).evaluate(e)
        if interval is not None and math.isfinite(interval.low):  # (ln(0) is -inf: no bound Z3 takes)
            self.constraints.append(fresh >= self.make_constant(interval.low))
        if interval is not None and math.isfinite(interval.high):
            self.constraints.append(fresh <= self.make_constant(interval.high))
        return fresh

    def encode_call(self, e: ir.Call) -> z3.ArithRef:
        args = [self.encode(a.expr) for a in e.args if isinstance(a, ir.ExprArg)]
        nan = [self.is_nan(a) for a in args]
        if e.fun in ("Min", "Max"):  # a NaN operand gives the other (arithmetic.minimum, maximum)
            a, b = args
            which = z3.If(a <= b, a, b) if e.fun == "Min" else z3.If(a >= b, a, b)
            if z3.is_false(nan[0]) and z3.is_false(nan[1]):
                return which
            return self.mark_nan(z3.If(nan[0], b, z3.If(nan[1], a, which)), z3.And(nan[0], nan[1]))
        if e.fun == "Abs":
            return self.mark_nan(z3.If(args[0] >= 0, args[0], -args[0]), nan[0])
        if e.fun in ("Floor", "Ceil"):
            self.count += 1
            whole = z3.ToReal(z3.Int(f"{e.fun.lower()}!{self.count}", self.context))
            if e.fun == "Floor":
                self.constraints += [whole <= args[0], args[0] < whole + 1]
            else:
                self.constraints += [whole - 1 < args[0], args[0] <= whole]
            return self.mark_nan(whole, nan[0])
        if e.fun == "Sqrt":  # NaN of a negative number
            root = self.make_fresh("sqrt")
            self.constraints.append(root >= 0)
            return self.mark_nan(root, args[0] < 0 if z3.is_false(nan[0]) else z3.Or(nan[0], args[0] < 0))
        if e.fun == "Exp":  # at least 0, not above: a float's exp underflows to 0 below about -745
            power = self.make_fresh("exp")
            self.constraints.append(power >= 0)
            return self.mark_nan(power, nan[0])
        if e.fun == "Pow":
            return self.encode_power(e, e.args[0].expr, e.args[1].expr)
        if e.fun == "Ln":
            return self.encode_constant_or_fresh(e, e.fun.lower())
        return self.name_quantity(e, show_expr(self.program, e), self.observable_range(e))

    def observable_range(self, e: ir.Call) -> Interval:
        if e.fun in ("Used", "Free", "CachedIn"):
            ref = e.args[0].ref
            return Interval(0.0, max(p.cap for p in self.program.pools[ref.base : ref.base + ref.count]), False)
        if e.fun in ("Holders", "Queued", "Queue"):
            return Interval(0.0, math.inf, True)
        return Interval(0.0, math.inf, False)


# --------------------------------------------------------------------------
# Deciding a property
# --------------------------------------------------------------------------

def format_model_value(value: z3.ExprRef) -> str:
    """A witness as a number the source could write: whole numbers exactly
    up to 10^15, others (and a model's 300-digit integers) to 12 digits."""
    if z3.is_algebraic_value(value):
        value = value.approx(12)
    if z3.is_int_value(value):
        return _format_whole(value.as_long())
    if z3.is_rational_value(value):
        fraction = value.as_fraction()
        return _format_whole(fraction.numerator) if fraction.denominator == 1 else _format_float(fraction)
    return str(value)


def _format_whole(n: int) -> str:
    return str(n) if abs(n) < 10**15 else _format_float(n)


def _format_float(x) -> str:
    """12 digits; a value beyond a float's range (a model's integer above 1.8e308) by its power of ten."""
    try:
        return f"{float(x):.12g}"
    except OverflowError:
        whole = abs(int(x))
        return f"{'-' if x < 0 else ''}about 10^{len(str(whole)) - 1}"


def describe_witness(encoder: Encoder, model: z3.ModelRef, term: z3.ArithRef) -> str:
    """``-1 when `o` = 0, `prompt` = 2``: the site's value and what it read."""
    value = show_model_value(encoder, model, term)
    read = list_constants(term) | encoder.site_reads
    listed = [(name, q) for name, q in encoder.named.items() if q.get_id() in read]
    # `x`' (an attribute the path forgot, read again) is `x` when the witness names no other `x`
    stems = [name.rstrip("'") for name, _ in listed]
    named = [f"{stem if stems.count(stem) == 1 else name} = {show_model_value(encoder, model, q)}"
             for (name, q), stem in zip(listed, stems)]
    return value + (f" when {', '.join(named)}" if named else "")


def show_model_value(encoder: Encoder, model: z3.ModelRef, term: z3.ArithRef) -> str:
    """``term``'s value in ``model``: NaN where the model makes it NaN (its real value then means nothing)."""
    if z3.is_true(model.eval(encoder.is_nan(term), model_completion=True)):
        return "NaN"
    return format_model_value(model.eval(term, model_completion=True))


def list_constants(term: z3.ExprRef) -> set[int]:
    """The ids of the uninterpreted constants ``term`` is made of."""
    found: set[int] = set()
    seen: set[int] = set()
    pending = [term]
    while pending:
        e = pending.pop()
        if e.get_id() in seen:
            continue
        seen.add(e.get_id())
        if z3.is_const(e) and e.decl().kind() == z3.Z3_OP_UNINTERPRETED:
            found.add(e.get_id())
        pending.extend(e.children())
    return found


def encode_domain(encoder: Encoder, domain: Domain, term: z3.ArithRef) -> z3.BoolRef:
    """``term`` is within ``domain`` (questions.Domain)."""
    holds = [term > encoder.make_constant(domain.low) if domain.above else term >= encoder.make_constant(domain.low)]
    if math.isfinite(domain.high):
        holds.append(term <= encoder.make_constant(domain.high))
    if domain.whole:
        holds.append(z3.IsInt(term))
    return z3.And(*holds)


def make_solver(encoder: Encoder) -> z3.Solver:
    solver = z3.Solver(ctx=encoder.context)
    solver.set("rlimit", RESOURCE_LIMIT)
    solver.set("timeout", TIME_LIMIT_MS)
    solver.add(*encoder.facts, *encoder.constraints)
    return solver


def check_bad(encoder: Encoder, bad: z3.BoolRef) -> tuple[z3.CheckSatResult, z3.Solver]:
    """Whether ``bad`` can hold on the encoder's path: Z3's answer, and the solver (its model when sat)."""
    solver = make_solver(encoder)
    solver.add(bad)
    answer = solver.check()
    if answer == z3.unknown and z3.is_or(bad):
        # Z3 gives up on a disjunction whose one part it cannot decide (`Not(IsInt(z * z))` of a z whole
        # on the path but not in its range): each part asked alone, in the order written, the first
        # satisfiable one the witness's (issue 23: the index fault 4 of `h[pow(z, 2)]` went unwarned)
        for part in bad.children():
            solver = make_solver(encoder)
            solver.add(part)
            if solver.check() == z3.sat:
                answer = z3.sat
                break
    return answer, solver


def find_witness(encoder: Encoder, solver: z3.Solver, term: z3.ArithRef) -> str:
    model = solver.model()
    # a witness in whole numbers reads better (`known` = 2, not 1.5), when there is one
    solver.add(*[z3.IsInt(quantity) for quantity in encoder.named.values()])
    if solver.check() == z3.sat:
        model = solver.model()
    return describe_witness(encoder, model, term)


def decide(encoder: Encoder, term: z3.ArithRef, bad: z3.BoolRef) -> Verdict:
    """Does ``bad`` hold for every admissible value, some, or none?"""
    answer, solver = check_bad(encoder, bad)
    if answer != z3.sat:
        return Verdict(NEVER, "")
    witness = find_witness(encoder, solver, term)
    solver = make_solver(encoder)
    solver.add(z3.Not(bad))
    return Verdict(ALWAYS if solver.check() == z3.unsat else SOMETIMES, witness)


#: The most loops on a site's path whose iterations are asked apart, and for 1, 2, 3 loops how many of each
#: one's first iterations are asked one by one (then all the later ones together): at most 7, 9, 8 questions.
MAX_SPLIT_LOOPS = 3
FIRST_ITERATIONS = {1: 6, 2: 2, 3: 1}


def list_iteration_choices(loops: list[tuple[int, int]]) -> Iterator[dict]:
    """Every way of choosing, for each loop of ``loops``, which of its iterations the site is in
    (``Encoder.enter_loop``): its first, second, ... FIRST_ITERATIONS one, or any later one."""
    n = FIRST_ITERATIONS[len(loops)]
    options = [(FIRST, k) for k in range(n)] + [(LATER, n)]
    for choice in itertools.product(options, repeat=len(loops)):
        yield dict(zip(loops, choice))


def decide_by_iterations(loops: list[tuple[int, int]],
                         ask: Callable[[dict], tuple[Encoder, z3.ArithRef, z3.BoolRef]]) -> Verdict | None:
    """The verdict with the site asked in each of the first iterations of each loop of ``loops`` and in
    the later ones apart (``list_iteration_choices``), the first witness found the verdict's. ``ask
    (iterations)`` encodes the question so. None when Z3 cannot decide one of them (the verdict asked as
    a whole then stands: an unknown is never taken for "no fault")."""
    loops = loops[-MAX_SPLIT_LOOPS:]  # (the innermost: the others any iteration, as their heads say)
    witness, always = None, True
    for iterations in list_iteration_choices(loops):
        encoder, term, bad = ask(iterations)
        answer, solver = check_bad(encoder, bad)
        if answer == z3.unknown:
            return None
        if answer == z3.sat and witness is None:
            witness = find_witness(encoder, solver, term)
        if always:
            solver = make_solver(encoder)
            solver.add(z3.Not(bad))
            always = solver.check() == z3.unsat  # (unknown: some values may be good, a warning)
    if witness is None:
        return Verdict(NEVER, "")
    return Verdict(ALWAYS if always else SOMETIMES, witness)


def formulate(question: Question, encoder: Encoder, term: z3.ArithRef, whole: bool = False) -> z3.BoolRef:
    """The fault as a formula of ``term``. ``whole``: the range of the site's expression holds whole
    numbers only (``ranges.RangeEvaluator``), so a fraction is no index: Z3 asked ``Not(IsInt(2 * z))``
    of a whole ``z`` gives up (unknown, which is no finding: the fault beside it went unwarned)."""
    nan, number = encoder.is_nan(term), encoder.is_number(term)
    if question.fault == "domain":  # asked where the run evaluates the draw (questions.list_draws)
        tests = [encoder.encode_test(test, truth) for test, truth in question.conditions]
        return z3.And(*tests, z3.Or(nan, z3.Not(encode_domain(encoder, question.domain, term))))
    if question.fault == "index":  # (NaN is no index; a fault named first, as the run stops at it)
        faults = [term < 0, term > encoder.make_constant(question.limit)] + ([] if whole else [z3.Not(z3.IsInt(term))])
        return z3.Or(nan, *[z3.And(number, fault) for fault in faults]) if not z3.is_false(nan) else z3.Or(*faults)
    if question.fault == "guard":
        fault = z3.And(term != 0, term != 1)
        return z3.Or(nan, z3.And(number, fault)) if not z3.is_false(nan) else fault
    if question.fault == "negative":  # (NaN is not below 0)
        return z3.And(number, term < 0) if not z3.is_false(nan) else term < 0
    return z3.And(number, term > encoder.make_constant(question.limit)) if not z3.is_false(nan) else \
        term > encoder.make_constant(question.limit)
