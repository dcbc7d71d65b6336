"""Programs whose every run is the same run, for the property "no false warning, no missed fault" (issue 23).

tests/strategies.py's programs are meant to run cleanly, so the linker's questions on them are mostly
settled by their construction (a family index is a constant or a `choose`'s, a guard a comparison). These
are meant to ask the questions: a session of sets over a few attributes (copies, differences by a
constant, sums, products, divisions, min, max, abs, floor, pow, conditionals, comparisons; serial and
turn_no), loops bounded through a copy of the turn number or a counter (`set calls = turn_no; branch
(calls < T)`, `set next = turn_no + 1; branch (next <= T)`, `set i = i + 1; branch (i >= T)`), branches on
computed guards, `branch with` a computed probability, and the sites of every kind of warning: a family
index (`run h[E]`), a guard (`branch (E)`), a hold's units and a grow's amount that can be negative.

Nothing draws a value that is not fixed (`branch with` a test: a probability of 0 or 1) and nothing reads
the state of a pool or a stage or the clock, so a session's values depend on its serial alone, and the one
run of an `arrive batch(N)` workload goes through everything any run does. Each site is written twice:
as it is (``text``, which the linker judges) and observed (``observed``: `observe sK = E;` before it, and
a guard or an index that a run would stop at ends the session there instead, so that the others go on):
the run of ``observed`` then says, site by site, whether some run reaches a bad value there.
"""

from __future__ import annotations

from typing import NamedTuple

from hypothesis import strategies as st

#: The attributes a session sets (all of them at its start), and the loop counters among them.
ATTRIBUTES = ("x", "y", "z")
COUNTERS = ("calls", "next", "i")


class Site(NamedTuple):
    """A statement a warning may name: its line in ``text``, its kind and the family's size (index)."""

    line: int
    kind: str  # "index", "guard", "negative"
    size: int

    def is_bad(self, value: float) -> bool:
        if self.kind == "index":
            return not (0 <= value <= self.size - 1 and value == int(value))
        if self.kind == "guard":
            return value not in (0.0, 1.0)
        return value < 0


class Deterministic(NamedTuple):
    text: str
    observed: str
    sites: tuple[Site, ...]
    features: frozenset
    strict: bool


class Writer:
    def __init__(self, draw, strict: bool):
        self.draw = draw
        #: only the top level sets attributes and takes turns (a branch's or hold's blocks and a loop's body
        #: hold sites), no power and no division by an attribute (0 / 0 is NaN, which the linker does not
        #: model): the fragment where the linker forgets nothing it needs (below)
        self.strict = strict  # (and a site a run stops at only at the top or in a loop's body: below)
        self.text: list[str] = []
        self.observed: list[str] = []
        self.sites: list[Site] = []
        self.features: set[str] = set()
        self.family = draw(st.integers(2, 4))

    def pick(self, choices):
        return self.draw(st.sampled_from(choices))

    def emit(self, depth: int, original: str, observed: str | None = None) -> None:
        self.text.append("  " * depth + original)
        self.observed.append("  " * depth + (original if observed is None else observed))

    # -- expressions ------------------------------------------------------------------------
    def atom(self) -> str:
        return self.pick(("0", "1", "2", "3", "-1", "0.5", "serial", "turn_no") + ATTRIBUTES + COUNTERS)

    def expression(self, depth: int = 2) -> str:
        if depth == 0 or self.draw(st.integers(0, 2)) == 0:
            return self.atom()
        a, b = self.expression(depth - 1), self.expression(depth - 1)
        form = self.pick(("add", "sub", "sub const", "mul", "div const", "min", "max", "abs", "floor", "cond",
                          "compare") + (() if self.strict else ("pow", "div")))
        self.features.add(form)
        return {"add": f"{a} + {b}", "sub": f"{a} - ({b})", "sub const": f"{a} - {self.pick(('1', '2'))}",
                "mul": f"({a}) * {self.pick(('2', '-1', b))}", "div": f"({a}) / ({b})",
                "div const": f"({a}) / {self.pick(('2', '4'))}", "min": f"min({a}, {b})", "max": f"max({a}, {b})",
                "abs": f"abs({a})", "floor": f"floor({a})", "pow": f"pow({a}, {self.pick(('2', '3'))})",
                "cond": f"({a} < {b} ? {a} : {b})", "compare": self.comparison(a, b)}[form]

    def comparison(self, a: str | None = None, b: str | None = None) -> str:
        a = a or self.pick(("serial", "turn_no") + ATTRIBUTES + COUNTERS)
        b = b or self.pick(("0", "1", "2", "3") + ATTRIBUTES)
        return f"({a}) {self.pick(('<', '<=', '>', '>=', '==', '!='))} ({b})"

    def index(self) -> str:
        return self.pick(("turn_no", "turn_no - 1", "calls", "next - 1", "next", "i", "serial", "serial + 1",
                          "x", "y - 1", self.expression(1), self.expression()))

    # -- statements --------------------------------------------------------------------------
    def site(self, kind: str, size: int = 0) -> int:
        self.sites.append(Site(len(self.text) + 1, kind, size))
        self.features.add(kind)
        return len(self.sites) - 1

    def block(self, depth: int, holding: bool, in_loop: bool, size: int) -> None:
        for _ in range(self.draw(st.integers(1, size))):
            self.statement(depth, holding, in_loop)

    def statement(self, depth: int, holding: bool, in_loop: bool) -> None:
        top = depth == 0 and not in_loop
        faults = depth == 0 or not self.strict  # an index or guard a run stops at: not in a nested block
        kinds = ["run"] + (["index", "guard"] * (2 if self.strict else 1) if faults else []) + \
            (["set", "set"] if top or not self.strict else [])
        if depth < 3:
            kinds += ["branch with", "hold"]
        if holding:
            kinds.append("grow")
        if not in_loop and depth < 3 and (top or not self.strict):
            kinds.append("turn")
        kind = self.pick(kinds)
        pad = depth + 1
        if kind == "run":
            self.emit(pad, f"run g ({self.pick(('1', '2'))});")
        elif kind == "set":
            self.emit(pad, f"set {self.pick(ATTRIBUTES)} = {self.pick((self.expression(), self.atom()))};")
        elif kind == "turn":
            self.features.add("turn")
            self.emit(pad, "turn;")
        elif kind == "index":
            e = self.index()
            k = self.site("index", self.family)
            self.emit(pad, f"run h[{e}] (1);",
                      f"observe s{k} = {e}; branch ((({e}) >= 0) && (({e}) <= {self.family - 1}) && (floor({e}) == ({e}))) "
                      f"{{ run h[{e}] (1); }} else {{ end; }}")
        elif kind == "guard":
            e = self.pick((self.comparison(), self.expression(), f"{self.comparison()} && {self.comparison()}"))
            k = self.site("guard")
            self.emit(pad, f"branch ({e}) {{", f"observe s{k} = {e}; branch ((({e}) == 0) || (({e}) == 1)) {{ branch ({e}) {{")
            self.block(depth + 1, holding, in_loop, 2)
            self.emit(pad, "} else {")
            self.block(depth + 1, holding, in_loop, 2)
            self.emit(pad, "}", "} } else { end; }")
        elif kind == "branch with":
            self.features.add("branch with")
            self.emit(pad, f"branch with ({self.comparison()}) {{")
            self.block(depth + 1, holding, in_loop, 2)
            self.emit(pad, "} else {")
            self.block(depth + 1, holding, in_loop, 2)
            self.emit(pad, "}")
        elif kind == "hold":
            e = self.pick((self.expression(), "x", "y - 1", "z + 1", "turn_no", "serial - 1", "x - 1"))
            k = self.site("negative")
            self.emit(pad, f"hold mem ({e}) {{", f"observe s{k} = {e}; hold mem ({e}) {{")
            self.block(depth + 1, True, in_loop, 3)
            self.emit(pad, "}")
        else:
            e = self.pick((self.expression(), "x - 1", "z", "calls - 1", "serial - 1"))
            k = self.site("negative")
            self.emit(pad, f"grow mem ({e});", f"observe s{k} = {e}; grow mem ({e});")

    def loop(self) -> None:
        """A loop bounded through the turn number, a copy of it or a counter; its body assigns no counter."""
        form = self.pick(("copy", "difference", "counter", "turn"))
        bound = self.draw(st.integers(1, 5))
        self.features.add(f"loop {form}")
        self.emit(1, "loop {")
        self.block(1, False, True, 4)
        self.emit(2, "run g (1);")
        if form == "copy":
            lines = ["set calls = turn_no;", f"branch (calls < {bound}) {{ turn; }} else {{ end; }}"]
        elif form == "difference":
            lines = ["set next = turn_no + 1;", f"branch (next <= {bound}) {{ turn; }} else {{ end; }}"]
        elif form == "counter":
            lines = ["set i = i + 1;", f"branch (i >= {bound}) {{ end; }}"]
        else:
            lines = ["turn;", f"branch (turn_no > {bound}) {{ end; }}"]
        for line in lines:
            self.emit(2, line)
        self.emit(1, "}")

    def program(self) -> Deterministic:
        sessions = self.draw(st.integers(1, 4))
        for line in ("pool mem { cap 1000000; }", "stage g : delay;", f"stage h[{self.family}] : delay;",
                     f"workload {{ arrive batch({sessions}); }}", "session {"):
            self.emit(0, line)
        for name in ATTRIBUTES:
            self.emit(1, f"set {name} = {self.pick(('serial', '0', '1', '2', '-1', 'serial - 1', '2 * serial'))};")
        for line in ("set calls = turn_no;", "set next = turn_no + 1;", "set i = 0;"):
            self.emit(1, line)
        self.block(0, False, False, 4)
        if self.draw(st.integers(0, 3)):
            self.loop()
        self.emit(0, "}")
        self.emit(0, "run { horizon 1000; }")
        return Deterministic("\n".join(self.text) + "\n", "\n".join(self.observed) + "\n", tuple(self.sites),
                             frozenset(self.features), self.strict)


@st.composite
def deterministic_programs(draw, strict: bool | None = None) -> Deterministic:
    """A program of the kind above; ``strict`` (drawn when None): of the fragment where only the top level
    sets attributes and takes turns, and nothing is a power or a division by an attribute."""
    return Writer(draw, draw(st.booleans()) if strict is None else strict).program()
