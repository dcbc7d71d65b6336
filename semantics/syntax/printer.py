"""The canonical layout of a serQ program (``serq-ref fmt``), comments kept.

``format_text(text, file)`` returns the program ``text`` printed in the
layout docs/syntax.md ("The canonical layout") describes. The program must
parse (a syntax error is the same ProgramError `check` raises); it need not
compile, so a file with an undefined name or a library of definitions is
formatted like any other.

How it works. The text is parsed a second time by the grammar's own LALR
tables with every token kept (``keep_all_tokens``) and the comments, which
the grammar ignores, collected by a lexer callback; neither changes what the
parser accepts or builds, so the printed program reads back to the same AST
(tests/test_fmt.py holds the IR of the two equal). The tree is printed as a
sequence of *segments*, each one output line or a few: an item or statement
without a block, the head of a construct up to its ``{``, a closing ``}``
with what follows it (``} else {``, ``} cache (e)``). Inside a segment a
Wadler-style document (groups that break as a whole, continuation lines
aligned) wraps what does not fit in WIDTH columns. Comments are placed by
their position relative to the segments (docs/syntax.md gives the rule).
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from functools import lru_cache

import lark
from lark import Token, Tree

from ..errors import ProgramError
from .parser import build_lark, parse_text

#: The width a segment is wrapped to (a line may be longer when nothing in it can break).
WIDTH = 100
#: One level of indentation.
INDENT = "  "
#: Columns between the code and a trailing comment (the longest line of an aligned run).
COMMENT_GAP = 2

# --------------------------------------------------------------------------
# Parsing with every token and the comments
# --------------------------------------------------------------------------


class CommentSink:
    """Where the lexer callback puts the comments of the parse under way."""

    def __init__(self) -> None:
        self.comments: list[Token] = []

    def __call__(self, token: Token) -> Token:
        self.comments.append(token)
        return token


SINK = CommentSink()


@lru_cache(maxsize=1)
def build_full_parser() -> lark.Lark:
    """The grammar's parser keeping every token (keywords and punctuation
    too, so that each has its position) and handing comments to SINK."""
    return build_lark("fmt", keep_all_tokens=True, lexer_callbacks={"COMMENT": SINK})


def parse_full(text: str) -> tuple[Tree, list[Token]]:
    """The full parse tree of ``text`` (which parses) and its comments, in order."""
    parser = build_full_parser()
    SINK.comments = []
    try:
        tree = parser.parse(text)
        return tree, list(SINK.comments)
    finally:
        SINK.comments = []


# --------------------------------------------------------------------------
# Documents: text, breakable spaces, groups, alignment
# --------------------------------------------------------------------------


class _Line:
    """A space, or a line break when its group does not fit."""

    def __repr__(self) -> str:  # pragma: no cover - debugging aid
        return "LINE"


LINE = _Line()


@dataclass(frozen=True, slots=True)
class Group:
    """Printed on one line if it fits in what is left of the line, else
    every LINE of its own (not of a nested group) breaks."""

    parts: object


@dataclass(frozen=True, slots=True)
class Fill:
    """Items separated by spaces, a line breaking before an item only when
    that item (and, for the last, what follows it) would not fit."""

    items: tuple


@dataclass(frozen=True, slots=True)
class _FillRest:
    items: tuple
    index: int


@dataclass(frozen=True, slots=True)
class Align:
    """Its line breaks continue at the column where it starts."""

    parts: object


def render(doc: object, indent: int, width: int = WIDTH) -> list[str]:
    """The lines of ``doc`` printed from column ``indent`` (the first line's
    indentation included)."""
    lines: list[str] = []
    current: list[str] = [" " * indent]
    column = indent
    stack: list[tuple[int, bool, object]] = [(indent, False, doc)]
    while stack:
        margin, flat, item = stack.pop()
        if isinstance(item, str):
            current.append(item)
            column += len(item)
        elif isinstance(item, list):
            stack.extend((margin, flat, part) for part in reversed(item))
        elif item is LINE:
            if flat:
                current.append(" ")
                column += 1
            else:
                lines.append("".join(current).rstrip())
                current = [" " * margin]
                column = margin
        elif isinstance(item, Align):
            stack.append((column, flat, item.parts))
        elif isinstance(item, Group):
            fits = flat or measure(item.parts, width - column, stack)
            stack.append((margin, fits, item.parts))
        elif isinstance(item, Fill):
            if flat:
                stack.append((margin, True, join(list(item.items), [LINE])))
            else:
                stack.append((margin, False, _FillRest(item.items, 1)))
                stack.append((margin, False, Group(item.items[0])))
        elif isinstance(item, _FillRest):
            if item.index < len(item.items):
                following = item.items[item.index]
                stack.append((margin, False, _FillRest(item.items, item.index + 1)))
                stack.append((margin, False, Group(following)))
                # the last item is measured with what follows the fill, up to the next break
                after = stack[:-2] if item.index == len(item.items) - 1 else []
                if measure([" ", following], width - column, after):
                    current.append(" ")
                    column += 1
                else:
                    lines.append("".join(current).rstrip())
                    current = [" " * margin]
                    column = margin
        elif item is None:
            continue
        else:  # pragma: no cover - a bug of the printer
            raise TypeError(f"not a document: {item!r}")
    lines.append("".join(current).rstrip())
    return lines


def measure(parts: object, room: int, rest: list[tuple[int, bool, object]]) -> bool:
    """Whether ``parts`` printed flat, and what follows it up to the next
    place the line may break, fit in ``room`` columns."""
    todo: list[tuple[bool, object]] = [(True, parts)]
    rest_index = len(rest)
    while room >= 0:
        if not todo:
            if rest_index == 0:
                return True
            rest_index -= 1
            _, flat, item = rest[rest_index]
            todo.append((flat, item))
            continue
        flat, item = todo.pop()
        if isinstance(item, str):
            room -= len(item)
        elif isinstance(item, list):
            todo.extend((flat, part) for part in reversed(item))
        elif item is LINE:
            if not flat:
                return True
            room -= 1
        elif isinstance(item, (Align, Group)):
            todo.append((flat, item.parts))
        elif isinstance(item, Fill):
            todo.append((flat, join(list(item.items), [LINE])))
        elif isinstance(item, _FillRest):  # the rest of a fill being printed: its next item may break
            if item.index < len(item.items):
                return True
    return False


def join(items: list[object], separator: list[object]) -> list[object]:
    out: list[object] = []
    for k, item in enumerate(items):
        if k:
            out.extend(separator)
        out.append(item)
    return out


def listing(items: list[object]) -> object:
    """``a, b, c`` that breaks after its commas, continuing under ``a``."""
    return Group(Align(join(items, [",", LINE])))


# --------------------------------------------------------------------------
# Numbers
# --------------------------------------------------------------------------

NUMBER = re.compile(r"(\d*)(?:\.(\d*))?(?:[eE]([+-]?)(\d+))?")


def format_number(text: str) -> str:
    """The literal's canonical spelling: the same value, and a literal in
    plain digits stays one (a seed written in digits is read exactly). The
    integer part loses its leading zeros (one is kept, or added before a
    leading point); a point with no digits after it gets a 0; the exponent is
    `e`, without `+` or leading zeros; the fraction's digits are kept."""
    match = NUMBER.fullmatch(text)
    if match is None:  # pragma: no cover - the lexer's NUMBER is this pattern
        return text
    whole, fraction, sign, exponent = match.groups()
    out = whole.lstrip("0") or "0"
    if fraction is not None:
        out += "." + (fraction or "0")
    if exponent is not None:
        out += "e" + ("-" if sign == "-" else "") + (exponent.lstrip("0") or "0")
    return out


# --------------------------------------------------------------------------
# Output lines and comments
# --------------------------------------------------------------------------


@dataclass(slots=True)
class OutLine:
    level: int
    code: str  # without the indentation; "" for a line that is only a comment
    comment: str | None = None
    blank_before: bool = False
    pad: int = 0  # spaces between the code and its trailing comment (align_comments)


Position = tuple[int, int]


def start_of(node: Tree | Token) -> Position:
    if isinstance(node, Token):
        return (node.line, node.column)
    return (node.meta.line, node.meta.column)


def end_of(node: Tree | Token) -> Position:
    if isinstance(node, Token):
        return (node.end_line, node.end_column)
    return (node.meta.end_line, node.meta.end_column)


def tokens_of(tree: Tree) -> list[Token]:
    """Every token of the tree (without recursion: a program may nest deeply)."""
    tokens: list[Token] = []
    todo: list[object] = [tree]
    while todo:
        node = todo.pop()
        if isinstance(node, Tree):
            todo.extend(node.children)
        elif isinstance(node, Token):
            tokens.append(node)
    return tokens


class Layout:
    """The output: segments in source order, with the comments between and
    inside them placed by position."""

    def __init__(self, text: str, tree: Tree, comments: list[Token]) -> None:
        self.source_lines = text.split("\n")
        self.comments = sorted(comments, key=lambda c: (c.line, c.column))
        self.next_comment = 0
        # where each token and comment ends, in source order: a blank line before something is a gap
        # of two or more lines after the element before it
        elements = [(start_of(t), t.end_line) for t in tokens_of(tree)]
        elements += [(start_of(c), c.end_line) for c in self.comments]
        elements.sort()
        self.previous_end: dict[Position, int] = {}
        last = 0
        for position, end_line in elements:
            self.previous_end[position] = last
            last = max(last, end_line)
        self.lines: list[OutLine] = []
        self.level = 0
        self.parts: list[object] = []
        self.seg_start: Position | None = None
        self.seg_end: Position | None = None
        self.seg_closing = False

    # ---------------------------------------------------------- segments

    def add(self, doc: object, start: Position, end: Position) -> None:
        """Append ``doc``, the source from ``start`` to ``end``, to the segment under way."""
        if self.seg_start is None:
            self.seg_start = start
            self.seg_closing = isinstance(doc, str) and doc.startswith("}")
        self.seg_end = end
        self.parts.append(doc)

    def close(self) -> None:
        """End the segment under way: its comments, then its lines."""
        if self.seg_start is None:
            return
        start, end = self.seg_start, self.seg_end
        level = self.level
        comment_level = level + 1 if self.seg_closing else level
        self.flush_comments(start, comment_level)
        blank = self.blank_before(start) and not self.seg_closing
        inner = self.take_comments(end)  # a comment inside the segment goes before it
        for comment in inner:
            self.emit(OutLine(comment_level, "", comment, blank))
            blank = False
        rendered = render(self.parts, len(INDENT) * level)
        for k, line in enumerate(rendered):
            self.emit(OutLine(level, line.lstrip(" ") if k == 0 else line[len(INDENT) * level:],
                              blank_before=blank and k == 0))
        # a continuation line keeps its own alignment: it is stored after the segment's indentation
        self.parts, self.seg_start, self.seg_end, self.seg_closing = [], None, None, False

    def take_comments(self, before: Position) -> list[str]:
        out = []
        while self.next_comment < len(self.comments) and start_of(self.comments[self.next_comment]) < before:
            out.append(self.text_of(self.comments[self.next_comment]))
            self.next_comment += 1
        return out

    def flush_comments(self, before: Position | None, level: int) -> None:
        """Place the comments before ``before`` (all that are left if None):
        one after code on its line trails the last line printed, one on a
        line of its own is a line of its own at ``level``."""
        while self.next_comment < len(self.comments):
            comment = self.comments[self.next_comment]
            position = start_of(comment)
            if before is not None and position >= before:
                return
            self.next_comment += 1
            text = self.text_of(comment)
            own_line = self.source_lines[comment.line - 1][: comment.column - 1].strip() == ""
            if not own_line and self.lines and self.lines[-1].comment is None and self.lines[-1].code:
                self.lines[-1].comment = text
            else:
                self.emit(OutLine(level, "", text, self.blank_before(position)))

    def blank_before(self, position: Position) -> bool:
        return position[0] - self.previous_end.get(position, position[0]) >= 2

    def emit(self, line: OutLine) -> None:
        if line.blank_before:
            previous = self.lines[-1] if self.lines else None
            line.blank_before = previous is not None and not previous.code.endswith("{")
        self.lines.append(line)

    def has_comment(self, start: Position, end: Position) -> bool:
        k = self.next_comment
        while k < len(self.comments) and start_of(self.comments[k]) < start:
            k += 1
        return k < len(self.comments) and start_of(self.comments[k]) < end

    @staticmethod
    def text_of(comment: Token) -> str:
        return str(comment).rstrip()

    # ------------------------------------------------------------- output

    def finish(self) -> str:
        self.close()
        self.flush_comments(None, 0)
        align_comments(self.lines)
        out: list[str] = []
        for line in self.lines:
            if line.blank_before:
                out.append("")
            text = INDENT * line.level + line.code if line.code else INDENT * line.level
            if line.comment is not None:
                text = (text + " " * line.pad if line.code else text) + line.comment
            out.append(text.rstrip())
        return "\n".join(out) + "\n" if out else ""


def align_comments(lines: list[OutLine]) -> None:
    """Trailing comments of consecutive lines start in one column: COMMENT_GAP
    after the longest code of the run. A run ends at a line without a
    trailing comment, a blank line, or a change of indentation; a line that
    opens or closes a block is in none (its comment is COMMENT_GAP after it)."""
    def aligned(line: OutLine) -> bool:
        return line.comment is not None and bool(line.code) and not line.code.endswith("{") \
            and not line.code.startswith("}")

    k = 0
    while k < len(lines):
        if not aligned(lines[k]):
            lines[k].pad = COMMENT_GAP
            k += 1
            continue
        j = k + 1
        while j < len(lines) and aligned(lines[j]) and not lines[j].blank_before and lines[j].level == lines[k].level:
            j += 1
        width = max(len(line.code) for line in lines[k:j]) + COMMENT_GAP
        for line in lines[k:j]:
            line.pad = width - len(line.code)
        k = j



# --------------------------------------------------------------------------
# The tree, printed
# --------------------------------------------------------------------------


def subtrees(tree: Tree, data: str | None = None) -> list[Tree]:
    return [c for c in tree.children if isinstance(c, Tree) and (data is None or c.data == data)]


def subtree(tree: Tree, data: str) -> Tree | None:
    found = subtrees(tree, data)
    return found[0] if found else None


def words(tree: Tree, kind: str = "NAME") -> list[str]:
    return [str(c) for c in tree.children if isinstance(c, Token) and c.type == kind]


def has_keyword(tree: Tree, word: str) -> bool:
    return any(isinstance(c, Token) and c.type not in ("NAME", "NUMBER", "STRING") and c.value == word
               for c in tree.children)


def braces_of(tree: Tree) -> tuple[Token, Token]:
    """The `{` and the last `}` among a node's own tokens."""
    tokens = [c for c in tree.children if isinstance(c, Token)]
    return next(t for t in tokens if t.value == "{"), next(t for t in reversed(tokens) if t.value == "}")


#: Operators of one precedence level: a chain of them is one group.
LEVELS = {"e_or": 0, "e_and": 1, "e_add": 2, "e_sub": 2, "e_mul": 3, "e_div": 3}
#: Option clauses written as a keyword, a space and an expression.
VALUE_OPTIONS = {"opt_cap": "cap", "opt_block": "block", "step_budget": "budget", "step_cost": "cost",
                 "step_chunk": "chunk", "run_horizon": "horizon", "run_warmup": "warmup", "run_seed": "seed",
                 "run_arrivals": "arrivals"}
#: Option clauses that are fixed words.
WORD_OPTIONS = {"opt_evict_lru": "evict lru;", "opt_preempt_none": "preempt none;",
                "opt_preempt_lifo": "preempt lifo;", "opt_queue_fifo": "queue fifo;",
                "opt_requeue_key": "requeue by key;",
                "step_serve_admission": "serve admission;", "step_serve_decode_first": "serve decode first;",
                "step_serve_exclusive": "serve exclusive prefill;", "wl_none": "arrive none;"}
#: Options with a parenthesised list of keys.
KEY_OPTIONS = {"opt_evict_by": "evict by ", "opt_queue_by": "queue by ", "opt_preempt_by": "preempt by ",
               "step_serve_by": "serve by "}
#: Arrival processes: `arrive KIND(e);`.
ARRIVALS = {"wl_poisson": "poisson", "wl_renewal": "renewal", "wl_closed": "closed", "wl_batch": "batch"}
#: Workload clauses that take a block.
WORKLOAD_BLOCKS = {"wl_init": "init", "wl_turn": "turn", "wl_session": "session"}


class Printer:
    def __init__(self, text: str, tree: Tree, comments: list[Token]) -> None:
        self.tree = tree
        self.out = Layout(text, tree, comments)

    def program(self) -> str:
        for item in self.tree.children:
            self.item(item)
        return self.out.finish()

    # ------------------------------------------------------------ helpers

    def line(self, doc: object, node: Tree) -> None:
        """A segment that is the whole of ``node``."""
        self.out.add(doc, start_of(node), end_of(node))
        self.out.close()

    def braces(self, node: Tree, children: list[Tree], each) -> None:
        """`` {``, each child at one level deeper (``each`` prints it and
        closes its segments), ``}``; ``{}`` when there is nothing inside."""
        lbrace, rbrace = braces_of(node)
        if not children and not self.out.has_comment(start_of(lbrace), start_of(rbrace)):
            self.out.add(" {}", start_of(lbrace), end_of(rbrace))
            return
        self.out.add(" {", start_of(lbrace), end_of(lbrace))
        self.out.close()
        self.out.level += 1
        for child in children:
            each(child)
        self.out.level -= 1
        self.out.add("}", start_of(rbrace), end_of(rbrace))

    def block(self, block: Tree) -> None:
        self.braces(block, subtrees(block), self.stmt)

    def head(self, doc: object, node: Tree) -> None:
        """The start of a construct whose block follows."""
        self.out.add(doc, start_of(node), start_of(node))

    def options_block(self, node: Tree, head: object, options: list[Tree], one_line: bool = False) -> None:
        """``head { option; ... }``: one option a line, or, where ``one_line``
        allows, all on one line when they fit and no comment is inside the
        braces (one in the head goes before the line, as in any segment)."""
        lbrace, rbrace = braces_of(node)
        if one_line and not self.out.has_comment(start_of(lbrace), end_of(rbrace)):
            inside = [self.option_doc(o) for o in options]
            doc = [head, " { ", join(inside, [" "]), " }"] if inside else [head, " {}"]
            flat = render(doc, len(INDENT) * self.out.level)
            if len(flat) == 1 and len(flat[0]) <= WIDTH:
                self.line(doc, node)
                return
        self.head(head, node)
        self.braces(node, options, self.option)
        self.out.close()

    # -------------------------------------------------------------- items

    def item(self, t: Tree) -> None:
        kind = t.data
        if kind == "let_item":
            self.line(["let ", words(t)[0], " = ", self.expr(subtrees(t)[0]), ";"], t)
        elif kind == "use_item":
            self.line(["use ", words(t, "STRING")[0], ";"], t)
        elif kind == "def_expr":
            self.line(["def ", words(t)[0], self.parameters(t), " = ", self.expr(subtrees(t)[-1]), ";"], t)
        elif kind == "def_block":
            self.head(["def ", words(t)[0], self.parameters(t)], t)
            self.block(subtree(t, "block"))
            self.out.close()
        elif kind == "pool_decl":
            self.options_block(t, ["pool ", words(t)[0], self.family(t)],
                               [c for c in subtrees(t) if c.data != "family"])
        elif kind == "stage_decl":
            self.stage(t)
        elif kind == "workload":
            self.options_block(t, "workload", subtrees(t))
        elif kind in ("session_item", "server_item"):
            self.head("session" if kind == "session_item" else "server", t)
            self.block(subtrees(t)[0])
            self.out.close()
        elif kind == "queue_decl":
            roles = subtree(t, "names")
            head = ["queue ", words(t)[0], self.family(t)]
            if has_keyword(t, ":"):
                head += [" : ", listing(words(roles)) if roles is not None else ""]
            self.options_block(t, head, [c for c in subtrees(t) if c.data not in ("family", "names")])
        elif kind == "run_block":
            self.options_block(t, "run", subtrees(t), one_line=True)
        elif kind == "share_item":
            self.line(["share ", self.policy(t), ";"], t)
        elif kind == "pull_item":
            latency = [" latency ", self.expr(subtrees(t)[0])] if has_keyword(t, "latency") else []
            names = words(t)
            self.line([names[0], " pull ", names[1], latency, " share ", self.policy(t), ";"], t)
        elif kind == "gauge_item":
            self.line(["gauge ", words(t)[0], " = ", self.expr(subtrees(t)[0]), ";"], t)
        else:  # pragma: no cover - every item of the grammar is above
            raise AssertionError(f"unknown item {kind}")

    def parameters(self, t: Tree) -> list[object]:
        names = subtree(t, "names")
        return ["(", listing(words(names)) if names is not None else "", ")"]

    def family(self, t: Tree) -> list[object]:
        family = subtree(t, "family")
        return [] if family is None else ["[", self.expr(subtrees(family)[0]), "]"]

    @staticmethod
    def policy(t: Tree) -> str:
        return {"share_maxmin": "maxmin", "share_bottleneck": "bottleneck"}[subtrees(t)[-1].data]

    def stage(self, t: Tree) -> None:
        kind = subtrees(t)[-1]
        head = ["stage ", words(t)[0], self.family(t), " : "]
        if kind.data == "step_kind":
            self.step_kind(t, head, kind)
        else:
            self.line([head, self.simple_kind(kind), ";"], t)

    def step_kind(self, node: Tree, head: list[object], kind: Tree) -> None:
        self.head([head, "step"], node)
        self.braces(kind, subtrees(kind), self.option)
        self.out.close()  # the optional `;` after the braces is not printed

    def simple_kind(self, kind: Tree) -> list[object]:
        if kind.data == "kind_delay":
            return ["delay"]
        name = "fifo" if kind.data == "kind_fifo" else "ps"
        argument = subtrees(kind)
        return [name, "(", self.expr(argument[0]), ")"] if argument else [name]

    # ------------------------------------------------------------ options

    def option(self, t: Tree) -> None:
        kind = t.data
        if kind in WORKLOAD_BLOCKS:
            self.head(WORKLOAD_BLOCKS[kind], t)
            self.block(subtrees(t)[0])
            self.out.close()
        elif kind == "q_pool":
            self.options_block(t, ["pool ", words(t)[0]], subtrees(t), one_line=True)
        elif kind == "q_serve_step":
            self.step_kind(t, ["serve "], subtrees(t)[0])
        elif kind == "q_entry":
            verb, *rest = subtrees(t)
            doc: list[object] = [self.verb(verb)]
            if has_keyword(t, "("):
                names = subtree(t, "names")
                doc += [" (", listing(words(names)) if names is not None else "", ")"]
            if has_keyword(t, "from"):
                doc += [" from ", words(t)[-1]]
            self.head(doc, t)
            self.block(subtree(t, "block"))
            self.out.close()
        else:
            self.line(self.option_doc(t), t)

    @staticmethod
    def verb(verb: Tree) -> str:
        return str(verb.children[0])

    def option_doc(self, t: Tree) -> object:
        """An option clause without a block, `;` included."""
        kind = t.data
        if kind in VALUE_OPTIONS:
            return [VALUE_OPTIONS[kind], " ", self.expr(subtrees(t)[0]), ";"]
        if kind in WORD_OPTIONS:
            return WORD_OPTIONS[kind]
        if kind in KEY_OPTIONS:
            return [KEY_OPTIONS[kind], self.arguments(subtrees(t)[0]), ";"]
        if kind == "opt_admit":
            return ["admit via ", self.path(subtrees(t)[0]), ";"]
        if kind == "step_memory":
            return ["memory ", self.path(subtrees(t)[0]), ";"]
        if kind == "step_self_preemption":
            rule, *condition = subtrees(t)
            return ["self preemption ", "continue" if rule.data == "self_continue" else "end",
                    [" when (", self.expr(condition[0]), ")"] if condition else [], ";"]
        if kind == "opt_share_prefixes":
            condition = subtrees(t)
            return ["share prefixes", [" when (", self.expr(condition[0]), ")"] if condition else [], ";"]
        if kind == "step_schedule_ahead":
            condition = subtrees(t)
            return ["schedule ahead", [" when (", self.expr(condition[0]), ")"] if condition else [], ";"]
        if kind == "step_load_remote":
            remote, delay = subtrees(t)
            return ["load remote (", self.expr(remote), ") after (", self.expr(delay), ");"]
        if kind == "step_offload":
            chunks, load, store = subtrees(t)
            return ["offload to (", self.expr(chunks), ") load after (", self.expr(load), ") store after (",
                    self.expr(store), ");"]
        if kind == "step_defer_free":
            condition = subtrees(t)
            return ["defer free", [" when (", self.expr(condition[0]), ")"] if condition else [], ";"]
        if kind == "step_speculate":
            tokens, accept, *_ = subtrees(t)
            extra, word = [], None  # the optional parts given, each after its keyword
            for c in t.children:
                if isinstance(c, Token) and c.value in ("lookahead", "slots", "within"):
                    word = c.value
                elif isinstance(c, Tree) and word is not None:
                    extra.append([f" {word} (", self.expr(c), ")"])
                    word = None
            return ["speculate (", self.expr(tokens), ") accept (", self.expr(accept), ")", extra, ";"]
        if kind == "opt_groups":
            groups = []
            for g in subtrees(t):
                parts = subtrees(g)
                if g.data == "group_full":
                    groups.append(["full", [" when (", self.expr(parts[0]), ")"] if parts else []])
                else:
                    groups.append(["window (", self.expr(parts[0]), ")",
                                   [" when (", self.expr(parts[1]), ")"] if len(parts) > 1 else []])
            return ["groups (", [[", " if i else "", g] for i, g in enumerate(groups)], ");"]
        if kind == "opt_spill":
            tier, link, amount, guard = subtrees(t)
            return ["spill ", self.path(tier), " via ", self.path(link), " (", self.expr(amount), ") when (",
                    self.expr(guard), ");"]
        if kind in ARRIVALS:
            return ["arrive ", ARRIVALS[kind], "(", self.expr(subtrees(t)[0]), ");"]
        if kind == "wl_trace":
            return ["trace ", words(t, "STRING")[0], " ordered" if words(t, "ORDERED") else "", ";"]
        if kind == "wl_hidden":
            return ["hidden ", listing(words(subtrees(t)[0])), ";"]
        if kind == "q_serve":
            kind_tree, *latency = subtrees(t)
            return ["serve ", self.simple_kind(kind_tree), [" latency ", self.expr(latency[0])] if latency else [],
                    ";"]
        if kind == "q_nic":
            return ["nic ", self.simple_kind(subtrees(t)[0]), ";"]
        raise AssertionError(f"unknown option {kind}")  # pragma: no cover - every option is above

    # --------------------------------------------------------- statements

    def stmt(self, t: Tree) -> None:
        kind = t.data
        if kind == "hold":
            self.hold(t)
        elif kind in ("s_branch", "s_branch_with"):
            guard, then_block, *else_block = subtrees(t)
            self.head(["branch with (" if kind == "s_branch_with" else "branch (", self.expr(guard), ")"], t)
            self.block(then_block)
            if else_block:
                self.out.add(" else", start_of(else_block[0]), start_of(else_block[0]))
                self.block(else_block[0])
            self.out.close()
        elif kind == "s_loop":
            self.head("loop", t)
            self.block(subtrees(t)[0])
            self.out.close()
        else:
            self.line(self.simple_stmt(t), t)

    def hold(self, t: Tree) -> None:
        clauses: list[object] = [Group(join([self.hold_pool(p) for p in subtrees(t, "hold_pool")], [",", LINE]))]
        reuse = subtree(t, "hold_reuse")
        if reuse is not None:
            clauses += [LINE, "reuse (", self.expr(subtrees(reuse)[0]), ")"]
        content = subtree(t, "hold_content")
        if content is not None:
            segments = [[self.expr(subtrees(s)[0]), " : ", self.expr(subtrees(s)[1])] for s in subtrees(content, "segment")]
            clauses += [LINE, "content (", listing(segments), ")"]
        admission = subtree(t, "hold_admission")
        if admission is not None:
            bindings = [[words(b)[0], " = ", self.expr(subtrees(b)[0])] for b in subtrees(admission, "binding")]
            clauses += [LINE, "at admission (", listing(bindings), ")"]
        self.head(["hold ", Group(Align(clauses))], t)
        self.block(subtree(t, "block"))
        cache = subtree(t, "hold_cache")
        if cache is not None:
            self.out.add([" cache (", self.expr(subtrees(cache)[0]), ")"], start_of(cache), end_of(cache))
        lease = subtree(t, "hold_lease")
        if lease is not None:
            pool, amount = subtrees(lease)
            self.out.add([" lease ", self.path(pool), " (", self.expr(amount), ")"], start_of(lease), end_of(lease))
        # `;` after a cache or lease clause, none after a bare `}` (the grammar takes both)
        self.out.add(";" if cache is not None or lease is not None else "", end_of(t), end_of(t))
        self.out.close()

    def hold_pool(self, p: Tree) -> list[object]:
        path, amount, *reserve = subtrees(p)
        doc: list[object] = [self.path(path), " (", self.expr(amount), ")"]
        if reserve:
            doc += [" reserve (", self.expr(reserve[0]), ")"]
        return doc

    def simple_stmt(self, t: Tree) -> object:
        kind = t.data
        trees = subtrees(t)
        if kind == "s_turn":
            return "turn;"
        if kind == "s_end":
            return "end;"
        if kind == "s_request":
            return ["request", *(" " + name for name in words(t)), ";"]
        if kind in ("s_set", "s_observe"):
            return ["set " if kind == "s_set" else "observe ", words(t)[0], " = ", self.expr(trees[0]), ";"]
        if kind in ("s_grow", "s_load"):
            return ["grow " if kind == "s_grow" else "load ", self.path(trees[0]), " (", self.expr(trees[1]), ");"]
        if kind in ("s_drop", "s_release"):
            return ["drop " if kind == "s_drop" else "release ", self.path(trees[0]), ";"]
        if kind == "s_run":
            mode = subtree(t, "mode_prefill") or subtree(t, "mode_decode")
            work = next(c for c in trees if c.data not in ("paths", "mode_prefill", "mode_decode", "path"))
            growing = [c for c in trees if c.data == "path"]
            return ["run ", self.paths(trees[0]), "" if mode is None else " " + str(mode.children[0]),
                    " (", self.expr(work), ")", [" growing ", self.path(growing[0])] if growing else [], ";"]
        if kind == "s_run_own":
            return ["run (", self.expr(trees[0]), ");"]
        if kind == "s_choose":
            return ["choose ", words(t)[0], " in ", self.expr(trees[0]), " by ", self.arguments(trees[1]), ";"]
        if kind == "s_mark":
            return ["mark ", words(t)[0], ";"]
        if kind == "s_call":
            args = subtree(t, "exprs")
            doc: list[object] = [self.path(trees[0]), " (", "" if args is None else self.listing(args), ")"]
            source = subtree(t, "call_from")
            if source is not None:
                doc += [" from ", self.path(subtrees(source)[0])]
            to = subtree(t, "call_to")
            if to is not None:
                pool, amount = subtrees(to)
                doc += [" to ", self.path(pool), " (", self.expr(amount), ")"]
            return doc + [";"]
        if kind == "s_serving":
            role = str(trees[0].children[0])
            rest = trees[1:]
            target = self.target(rest[0]) if rest[0].data in ("target_index", "target_on") else []
            if target:
                rest = rest[1:]
            growing = [" growing ", self.path(rest[1])] if len(rest) > 1 else []
            return [role, target, " ", self.expr(rest[0]), growing, ";"]
        if kind == "s_transfer":
            rest = trees
            target = self.target(rest[0]) if rest[0].data in ("target_index", "target_on") else []
            if target:
                rest = rest[1:]
            doc = ["transfer", target, " ", self.expr(rest[0])]
            if len(rest) > 1:
                source, dest, amount = subtrees(rest[1])
                doc += [" from ", self.path(source), " to ", self.path(dest), " (", self.expr(amount), ")"]
            return doc + [";"]
        raise AssertionError(f"unknown statement {kind}")  # pragma: no cover - every statement is above

    def target(self, t: Tree) -> list[object]:
        if t.data == "target_index":
            return [" [", self.expr(subtrees(t)[0]), "]"]
        return [" on ", self.paths(subtrees(t)[0])]

    # -------------------------------------------------------- expressions

    def paths(self, t: Tree) -> object:
        return listing([self.path(p) for p in subtrees(t, "path")])

    def path(self, t: Tree) -> list[object]:
        out: list[object] = []
        for child in t.children:
            if isinstance(child, Token):
                out.append(str(child))
            elif isinstance(child, Tree):  # an index
                out += ["[", self.expr(subtrees(child)[0]), "]"]
        return out

    def listing(self, exprs: Tree) -> object:
        return listing([self.expr(e) for e in subtrees(exprs)])

    def arguments(self, exprs: Tree | None) -> list[object]:
        return ["(", "" if exprs is None else self.listing(exprs), ")"]

    def expr(self, t: Tree) -> object:
        kind = t.data
        if kind == "e_num":
            return format_number(str(t.children[0]))
        if kind == "e_path":
            return self.path(t.children[0])
        if kind in LEVELS:
            return self.chain(t)
        trees = subtrees(t)
        if kind in ("e_lt", "e_le", "e_gt", "e_ge", "e_eq", "e_ne", "e_pow"):
            return Group(Align([self.expr(trees[0]), LINE, str(t.children[1]), " ", self.expr(trees[1])]))
        if kind == "e_neg":
            return ["-", self.expr(trees[0])]
        if kind == "e_not":
            return ["!", self.expr(trees[0])]
        if kind == "e_cond":
            guard, then, other = trees
            return Group(Align([self.expr(guard), LINE, "? ", self.expr(then), LINE, ": ", self.expr(other)]))
        if kind == "atom":  # parentheses, kept as written
            return ["(", self.expr(trees[0]), ")"]
        if kind == "e_call":
            return [words(t)[0], self.arguments(subtree(t, "exprs"))]
        if kind == "e_sample":
            return ["~", words(t)[0], self.arguments(subtree(t, "exprs"))]
        if kind == "e_sample_file":  # ~empirical("FILE", "COLUMN")
            path, column = words(t, "STRING")
            return ["~", words(t)[0], "(", path, ", ", column, ")"]
        if kind == "e_over":
            aggregate, variable = words(t)
            count, body = trees
            if count.data == "count_expr":
                count_doc: object = ["(", self.expr(subtrees(count)[0]), ")"]
            else:
                count_doc = format_number(str(count.children[0])) if count.data == "count_num" \
                    else str(count.children[0])
            return [aggregate, " ", variable, " in ", count_doc, " (", self.expr(body), ")"]
        raise AssertionError(f"unknown expression {kind}")  # pragma: no cover - every expression is above

    def chain(self, t: Tree) -> object:
        """``a + b - c``: the operands of one precedence level filled into
        lines, a line broken before an operator, continuing under ``a``."""
        level = LEVELS[t.data]
        links: list[tuple[str, Tree]] = []
        while isinstance(t, Tree) and LEVELS.get(t.data) == level:
            left, operator, right = t.children
            links.append((str(operator), right))
            t = left
        items: list[object] = [self.expr(t)]
        for operator, operand in reversed(links):
            items.append([operator, " ", self.expr(operand)])
        return Align(Fill(tuple(items)))


# --------------------------------------------------------------------------
# Entry points
# --------------------------------------------------------------------------

#: Nesting the printer can take (as the compiler: semantics/compiler.py).
RECURSION_LIMIT = 20000


def format_text(text: str, file: str) -> str:
    """``text`` in the canonical layout. A syntax error is the ProgramError
    `check` raises for it (the checking parser reads the text first)."""
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, RECURSION_LIMIT))
    try:
        parse_text(text, file)
        tree, comments = parse_full(text)
        return Printer(text, tree, comments).program()
    except RecursionError:
        raise ProgramError("the program nests too deeply to format: an expression or a block thousands of levels "
                           "deep (write a long sum with an aggregate, sum j in n (…))", file=file) from None
    finally:
        sys.setrecursionlimit(limit)
