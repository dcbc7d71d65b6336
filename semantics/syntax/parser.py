"""Text to AST: the LALR parser of grammar.lark and the tree-to-AST transformer.

``parse_text(text, file)`` returns an ``ast.Program`` whose nodes all carry the
span they were read from, or raises ``ProgramError`` at the first syntax
error with the terminals the parser expected there, spelled as the source
spells them ("expected ';' or '+', found 'hold'").
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path as FilePath

import lark
from lark import Transformer, v_args
from lark.lexer import PatternStr

from ..errors import ProgramError, Span
from . import ast

GRAMMAR_FILE = FilePath(__file__).with_name("grammar.lark")

#: How the error message spells the terminals that are not literal text.
TERMINAL_WORDS = {"NAME": "a name", "NUMBER": "a number", "STRING": 'a string ("...")', "$END": "the end of the file"}


@lru_cache(maxsize=1)
def build_parser() -> lark.Lark:
    """The LALR parser of the grammar, built once per process; its tables are
    cached on disk by lark (``get_cache_path``), since computing them takes
    most of a second and a `check` of a small program should not."""
    return build_lark()


def build_lark(flavour: str = "", **options) -> lark.Lark:
    """A LALR parser of the grammar with the options every parser of it has
    and ``options`` besides; ``flavour`` names the option set in the file of
    its cached tables (lark keeps tables per option set: the printer's
    parser, which keeps every token, has its own)."""
    grammar = GRAMMAR_FILE.read_text(encoding="utf-8")
    cache = get_cache_path(grammar)
    if flavour and isinstance(cache, str):
        cache = cache[: -len(".cache")] + f"-{flavour}.cache"
    return lark.Lark(grammar, parser="lalr", lexer="contextual", propagate_positions=True, maybe_placeholders=True,
                     cache=cache, **options)


def get_cache_path(grammar: str) -> str | bool:
    """Where lark keeps the parser tables of ``grammar``: a file named by the
    grammar's hash under the user's cache directory ($XDG_CACHE_HOME or
    ~/.cache, then serq-ref/), so that two checkouts with different grammars
    never overwrite each other's tables. lark checks the hash of the grammar,
    its options and its own version inside the file and rebuilds on any
    mismatch (or an unreadable file); a directory that cannot be created
    falls back to lark's own place in the temporary directory (True)."""
    import hashlib
    import os

    digest = hashlib.sha256(grammar.encode("utf-8")).hexdigest()[:16]
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    directory = os.path.join(base, "serq-ref")
    try:
        os.makedirs(directory, exist_ok=True)
    except OSError:
        return True
    return os.path.join(directory, f"grammar-{digest}-lark{lark.__version__}.cache")


@lru_cache(maxsize=1)
def get_terminal_spellings() -> dict[str, str]:
    """Terminal name -> its source spelling, for the expected-set of an error."""
    spellings = dict(TERMINAL_WORDS)
    for terminal in build_parser().terminals:
        if isinstance(terminal.pattern, PatternStr):
            spellings[terminal.name] = f"'{terminal.pattern.value}'"
    return spellings


#: Operators an expression may continue with; several of them are said as one.
OPERATORS = frozenset(f"'{op}'" for op in ("+", "-", "*", "/", "^", "<", "<=", ">", ">=", "==", "!=", "&&", "||", "?"))


@lru_cache(maxsize=1)
def get_keywords() -> frozenset[str]:
    """Every word the grammar reads as a keyword somewhere."""
    return frozenset(t.pattern.value for t in build_parser().terminals
                     if isinstance(t.pattern, PatternStr) and t.pattern.value.isidentifier())


def describe_expected(names: set[str] | frozenset[str]) -> str:
    """'a', 'b' or 'c', in a fixed (sorted) order; the operators that could
    continue an expression are said once, as "an operator"."""
    spellings = get_terminal_spellings()
    words = sorted({spellings.get(name, name.lower()) for name in names})
    if len(OPERATORS.intersection(words)) >= 3:
        words = sorted(w for w in words if w not in OPERATORS) + ["an operator"]
    if not words:
        return "nothing"
    if len(words) == 1:
        return words[0]
    return ", ".join(words[:-1]) + " or " + words[-1]


def parse_text(text: str, file: str) -> ast.Program:
    """Parse one file's text; a syntax error is a located ProgramError."""
    try:
        tree = build_parser().parse(text)
    except lark.exceptions.UnexpectedToken as error:
        from .syntax_errors import diagnose

        expected = get_accepted_terminals(error)
        diagnosis = diagnose(text, file, error, build_parser(), get_terminal_spellings(), expected)
        if diagnosis is not None:
            raise diagnosis from None
        token = error.token
        if token.type == "$END":
            found = "the end of the file"
            line, col = find_end_position(text)
        else:
            found = f"'{token.value}'"
            line, col = token.line, token.column
        width = len(str(token.value)) if token.type != "$END" else 1
        raise ProgramError(
            f"expected {describe_expected(expected)}, found {found}",
            Span(file, line, col, col + max(width, 1)),
        ) from None
    except lark.exceptions.UnexpectedCharacters as error:
        char = text[error.pos_in_stream] if error.pos_in_stream < len(text) else ""
        expected = describe_expected(error.allowed or set())
        raise ProgramError(
            f"expected {expected}, found '{char}'", Span(file, error.line, error.column, error.column + 1)
        ) from None
    except lark.exceptions.UnexpectedEOF as error:  # pragma: no cover - LALR reports $END as a token
        line, col = find_end_position(text)
        raise ProgramError(f"expected {describe_expected(set(error.expected))}, found the end of the file",
                           Span(file, line, col)) from None
    try:
        return BuildAst(file).transform(tree)
    except lark.exceptions.VisitError as error:
        if isinstance(error.orig_exc, ProgramError):
            raise error.orig_exc from None
        raise


def get_accepted_terminals(error: lark.exceptions.UnexpectedToken) -> set[str]:
    """The terminals that would let the parse go on: the interactive parser's
    answer where it has one (LALR's own expected-set merges lookaheads)."""
    interactive = getattr(error, "interactive_parser", None)
    if interactive is not None:
        try:
            accepted = set(interactive.accepts())
        except Exception:  # noqa: BLE001 - the plain expected-set is the fallback
            accepted = set()
        if accepted:
            return accepted
    return set(error.expected)


def find_end_position(text: str) -> tuple[int, int]:
    """The line and column just after the text's last character."""
    lines = text.split("\n")
    return len(lines), len(lines[-1]) + 1


# --------------------------------------------------------------------------
# Tree -> AST
# --------------------------------------------------------------------------


@v_args(meta=True)
class BuildAst(Transformer):
    """Builds ast nodes bottom-up; each rule method takes (meta, children)."""

    def __init__(self, file: str):
        super().__init__(visit_tokens=False)
        self.file = file

    def span(self, meta) -> Span:
        if getattr(meta, "empty", False) or not hasattr(meta, "line"):
            return Span(self.file, 1, 1)
        end = meta.end_column if meta.end_line == meta.line else None
        return Span(self.file, meta.line, meta.column, end)

    def token_span(self, token) -> Span:
        return Span(self.file, token.line, token.column, token.end_column)

    # ---------------------------------------------------------------- items

    def start(self, meta, items):
        return ast.Program(self.file, tuple(items))

    def let_item(self, meta, c):
        return ast.Let(str(c[0]), c[1], span=self.token_span(c[0]))

    def use_item(self, meta, c):
        return ast.Use(str(c[0])[1:-1], span=self.token_span(c[0]))

    def names(self, meta, c):
        return tuple(str(t) for t in c)

    def def_expr(self, meta, c):
        return ast.DefExpr(str(c[0]), c[1] or (), c[2], span=self.token_span(c[0]))

    def def_block(self, meta, c):
        return ast.DefBlock(str(c[0]), c[1] or (), c[2], span=self.token_span(c[0]))

    def family(self, meta, c):
        return c[0]

    def pool_decl(self, meta, c):
        return ast.PoolDecl(str(c[0]), c[1], tuple(c[2:]), span=self.token_span(c[0]))

    def opt_cap(self, meta, c):
        return ast.Option("cap", (c[0],), span=self.span(meta))

    def opt_block(self, meta, c):
        return ast.Option("block", (c[0],), span=self.span(meta))

    def opt_evict_lru(self, meta, c):
        return ast.Option("evict_lru", (), span=self.span(meta))

    def opt_evict_by(self, meta, c):
        return ast.Option("evict_by", c[0], span=self.span(meta))

    def opt_preempt_none(self, meta, c):
        return ast.Option("preempt_none", (), span=self.span(meta))

    def opt_preempt_lifo(self, meta, c):
        return ast.Option("preempt_lifo", (), span=self.span(meta))

    def opt_preempt_by(self, meta, c):
        return ast.Option("preempt_by", c[0], span=self.span(meta))

    def opt_requeue_key(self, meta, c):
        return ast.Option("requeue_key", (), span=self.span(meta))

    def opt_share_prefixes(self, meta, c):
        # values: the `when` condition or None
        return ast.Option("share_prefixes", (c[0],), span=self.span(meta))

    def opt_groups(self, meta, c):
        # values: the groups, each an Option "full" (its condition or None) or "window" (W, its condition or None)
        return ast.Option("groups", tuple(c), span=self.span(meta))

    def group_full(self, meta, c):
        return ast.Option("full", (c[0],), span=self.span(meta))

    def group_window(self, meta, c):
        return ast.Option("window", (c[0], c[1]), span=self.span(meta))

    def opt_queue_fifo(self, meta, c):
        return ast.Option("queue_fifo", (), span=self.span(meta))

    def opt_queue_by(self, meta, c):
        return ast.Option("queue_by", c[0], span=self.span(meta))

    def opt_admit(self, meta, c):
        return ast.Option("admit", (c[0],), span=self.span(meta))

    def opt_spill(self, meta, c):
        return ast.Option("spill", tuple(c), span=self.span(meta))

    def stage_decl(self, meta, c):
        return ast.StageDecl(str(c[0]), c[1], c[2], span=self.token_span(c[0]))

    def kind_fifo(self, meta, c):
        return ast.Kind("fifo", tuple(x for x in c if x is not None), span=self.span(meta))

    def kind_ps(self, meta, c):
        return ast.Kind("ps", (c[0],), span=self.span(meta))

    def kind_delay(self, meta, c):
        return ast.Kind("delay", (), span=self.span(meta))

    def step_kind(self, meta, c):
        return ast.Kind("step", tuple(c), span=self.span(meta))

    def step_budget(self, meta, c):
        return ast.Option("budget", (c[0],), span=self.span(meta))

    def step_cost(self, meta, c):
        return ast.Option("cost", (c[0],), span=self.span(meta))

    def step_chunk(self, meta, c):
        return ast.Option("chunk", (c[0],), span=self.span(meta))

    def step_serve_admission(self, meta, c):
        return ast.Option("serve_admission", (), span=self.span(meta))

    def step_serve_by(self, meta, c):
        return ast.Option("serve_by", c[0], span=self.span(meta))

    def step_serve_decode_first(self, meta, c):
        return ast.Option("serve_decode_first", (), span=self.span(meta))

    def step_serve_exclusive(self, meta, c):
        return ast.Option("serve_exclusive", (), span=self.span(meta))

    def step_memory(self, meta, c):
        return ast.Option("memory", (c[0],), span=self.span(meta))

    def step_self_preemption(self, meta, c):
        # values: the rule ("end" or "continue"), then the `when` condition or None
        return ast.Option("self_preemption", (c[0], c[1]), span=self.span(meta))

    def step_schedule_ahead(self, meta, c):
        # values: the `when` condition or None
        return ast.Option("schedule_ahead", (c[0],), span=self.span(meta))

    def step_defer_free(self, meta, c):
        # values: the `when` condition or None
        return ast.Option("defer_free", (c[0],), span=self.span(meta))

    def step_load_remote(self, meta, c):
        # values: the units loaded, the delay
        return ast.Option("load_remote", (c[0], c[1]), span=self.span(meta))

    def step_offload(self, meta, c):
        # values: the tier's chunks N, the load delay L, the store delay S (docs/design/cpu-offloading.md)
        return ast.Option("offload", (c[0], c[1], c[2]), span=self.span(meta))

    def step_speculate(self, meta, c):
        # values: the draft tokens K, the acceptance expression, then the lookahead slots, the draft slots and
        # the model length, each None when not given (docs/design/speculative-decoding.md, section 8)
        return ast.Option("speculate", tuple(c[:5]), span=self.span(meta))

    def self_end(self, meta, c):
        return "end"

    def self_continue(self, meta, c):
        return "continue"

    def workload(self, meta, c):
        return ast.Workload(tuple(c), span=self.span(meta))

    def wl_poisson(self, meta, c):
        return ast.Option("poisson", (c[0],), span=self.span(meta))

    def wl_renewal(self, meta, c):
        return ast.Option("renewal", (c[0],), span=self.span(meta))

    def wl_closed(self, meta, c):
        return ast.Option("closed", (c[0],), span=self.span(meta))

    def wl_batch(self, meta, c):
        return ast.Option("batch", (c[0],), span=self.span(meta))

    def wl_none(self, meta, c):
        return ast.Option("none", (), span=self.span(meta))

    def wl_trace(self, meta, c):
        return ast.Option("trace", (str(c[0])[1:-1], c[1] is not None), span=self.span(meta))

    def wl_init(self, meta, c):
        return ast.Option("init", (c[0],), span=self.span(meta))

    def wl_turn(self, meta, c):
        return ast.Option("turn", (c[0],), span=self.span(meta))

    def wl_session(self, meta, c):
        return ast.Option("session", (c[0],), span=self.span(meta))

    def wl_hidden(self, meta, c):
        return ast.Option("hidden", c[0], span=self.span(meta))

    def session_item(self, meta, c):
        return ast.SessionItem(c[0], span=self.span(meta))

    def server_item(self, meta, c):
        return ast.ServerItem(c[0], span=self.span(meta))

    def queue_decl(self, meta, c):
        name, family, roles, *qitems = c
        pools, entries = [], []
        serve = latency = nic = None
        for kind, payload, span in qitems:
            if kind == "pool":
                pools.append(payload)
            elif kind == "entry":
                entries.append(payload)
            elif kind == "serve":
                if serve is not None:
                    raise ProgramError(f"queue `{name}` has a second `serve`", span)
                serve, latency = payload
            else:
                if nic is not None:
                    raise ProgramError(f"queue `{name}` has a second `nic`", span)
                nic = payload
        return ast.QueueDecl(
            str(name), family, roles or (), tuple(pools), serve, latency, nic, tuple(entries),
            span=self.token_span(name),
        )

    def q_pool(self, meta, c):
        decl = ast.PoolDecl(str(c[0]), None, tuple(c[1:]), span=self.token_span(c[0]))
        return ("pool", decl, self.span(meta))

    def q_serve(self, meta, c):
        return ("serve", (c[0], c[1]), self.span(meta))

    def q_serve_step(self, meta, c):
        return ("serve", (c[0], None), self.span(meta))

    def q_nic(self, meta, c):
        return ("nic", c[0], self.span(meta))

    def q_entry(self, meta, c):
        (verb, verb_span), params, source, body = c
        entry = ast.Entry(verb, params or (), None if source is None else str(source), body, span=verb_span)
        return ("entry", entry, self.span(meta))

    def verb_name(self, meta, c):
        return (str(c[0]), self.token_span(c[0]))

    def verb_prefill(self, meta, c):
        return ("prefill", self.span(meta))

    def verb_decode(self, meta, c):
        return ("decode", self.span(meta))

    def verb_transfer(self, meta, c):
        return ("transfer", self.span(meta))

    def run_block(self, meta, c):
        return ast.RunBlock(tuple(c), span=self.span(meta))

    def run_horizon(self, meta, c):
        return ast.Option("horizon", (c[0],), span=self.span(meta))

    def run_warmup(self, meta, c):
        return ast.Option("warmup", (c[0],), span=self.span(meta))

    def run_seed(self, meta, c):
        return ast.Option("seed", (c[0],), span=self.span(meta))

    def run_arrivals(self, meta, c):
        return ast.Option("arrivals", (c[0],), span=self.span(meta))

    def share_maxmin(self, meta, c):
        return "MaxMin"

    def share_bottleneck(self, meta, c):
        return "Bottleneck"

    def share_item(self, meta, c):
        return ast.Share(c[0], span=self.span(meta))

    def pull_item(self, meta, c):
        return ast.Pull(str(c[0]), str(c[1]), c[2], c[3], span=self.span(meta))

    def gauge_item(self, meta, c):
        return ast.GaugeDecl(str(c[0]), c[1], span=self.token_span(c[0]))

    # ----------------------------------------------------------- statements

    def block(self, meta, c):
        return tuple(c)

    def s_turn(self, meta, c):
        return ast.Turn(span=self.span(meta))

    def s_request(self, meta, c):
        return ast.Request(None if c[0] is None else str(c[0]), span=self.span(meta))

    def s_set(self, meta, c):
        return ast.Set(str(c[0]), c[1], span=self.span(meta))

    def s_observe(self, meta, c):
        return ast.Observe(str(c[0]), c[1], span=self.span(meta))

    def hold(self, meta, c):
        pools = tuple(x for x in c if isinstance(x, ast.HoldPool))
        rest = [x for x in c if not isinstance(x, ast.HoldPool)]
        reuse, content, bindings, body, cache, lease = rest[0], rest[1], rest[2], rest[3], rest[4], rest[5]
        return ast.Hold(pools, reuse, bindings or (), body, cache, lease, span=self.span(meta),
                        content=content or ())

    def hold_pool(self, meta, c):
        return ast.HoldPool(c[0], c[1], c[2], span=self.span(meta))

    def hold_reuse(self, meta, c):
        return c[0]

    def hold_admission(self, meta, c):
        return tuple(c)

    def hold_content(self, meta, c):
        return tuple(c)

    def segment(self, meta, c):
        return ast.Segment(c[0], c[1], span=self.span(meta))

    def binding(self, meta, c):
        return ast.Binding(str(c[0]), c[1], span=self.token_span(c[0]))

    def hold_cache(self, meta, c):
        return c[0]

    def hold_lease(self, meta, c):
        return ast.Lease(c[0], c[1], span=self.span(meta))

    def s_grow(self, meta, c):
        return ast.Grow(c[0], c[1], span=self.span(meta))

    def s_drop(self, meta, c):
        return ast.Drop(c[0], span=self.span(meta))

    def s_release(self, meta, c):
        return ast.Release(c[0], span=self.span(meta))

    def s_load(self, meta, c):
        return ast.Load(c[0], c[1], span=self.span(meta))

    def mode_prefill(self, meta, c):
        return "Prefill"

    def mode_decode(self, meta, c):
        return "Decode"

    def s_run(self, meta, c):
        stages, mode, work, growing = c
        span = self.span(meta)
        if len(stages) > 1 and (mode is not None or growing is not None):
            what = "mode" if mode is not None else "`growing`"
            raise ProgramError(f"a run over several stages takes no {what}: it is one plain job holding them all",
                               span)
        return ast.Run(stages, mode or "Plain", work, growing, span=span)

    def s_run_own(self, meta, c):
        return ast.RunOwn(c[0], span=self.span(meta))

    def s_branch(self, meta, c):
        return ast.Branch(c[0], c[1], c[2] or (), False, span=self.span(meta))

    def s_branch_with(self, meta, c):
        return ast.Branch(c[0], c[1], c[2] or (), True, span=self.span(meta))

    def s_loop(self, meta, c):
        return ast.Loop(c[0], span=self.span(meta))

    def s_choose(self, meta, c):
        return ast.Choose(str(c[0]), c[1], c[2], span=self.span(meta))

    def s_end(self, meta, c):
        return ast.End(span=self.span(meta))

    def s_mark(self, meta, c):
        return ast.Mark(str(c[0]), span=self.span(meta))

    def s_call(self, meta, c):
        target, args, source, to = c
        return ast.CallStmt(target, args or (), source, to, span=self.span(meta))

    def call_from(self, meta, c):
        return c[0]

    def call_to(self, meta, c):
        return (c[0], c[1])

    def role_prefill(self, meta, c):
        return "prefill"

    def role_decode(self, meta, c):
        return "decode"

    def role_tool(self, meta, c):
        return "tool"

    def target_index(self, meta, c):
        return ("index", c[0])

    def target_on(self, meta, c):
        return ("on", c[0])

    def s_serving(self, meta, c):
        role, target, work, growing = c
        index, on = split_target(target)
        return ast.Serving(role, index, on, work, growing, span=self.span(meta))

    def s_transfer(self, meta, c):
        target, work, ends = c
        span = self.span(meta)
        if ends is None:
            raise ProgramError(
                "`transfer` needs `from POOL to POOL (n)`: the KV moves from one hold to another "
                "(a link that stores and forwards is written with `run`)", span)
        index, on = split_target(target)
        source, dest, amount = ends
        return ast.Transfer(index, on, work, source, dest, amount, span=span)

    def transfer_ends(self, meta, c):
        return (c[0], c[1], c[2])

    def paths(self, meta, c):
        return tuple(c)

    def path(self, meta, c):
        parts = []
        for k in range(0, len(c), 2):
            parts.append(ast.PathPart(str(c[k]), c[k + 1]))
        return ast.Path(tuple(parts), span=self.span(meta))

    def index(self, meta, c):
        return c[0]

    # ---------------------------------------------------------- expressions

    def exprs(self, meta, c):
        return tuple(c)

    def e_num(self, meta, c):
        return ast.Num(float(str(c[0])), span=self.token_span(c[0]), text=str(c[0]))

    def e_path(self, meta, c):
        return ast.Name(c[0], span=c[0].span)

    def e_call(self, meta, c):
        return ast.FunctionCall(str(c[0]), c[1] or (), span=self.span(meta))

    def e_sample(self, meta, c):
        return ast.Sample(str(c[0]), c[1] or (), span=self.span(meta))

    def e_sample_file(self, meta, c):
        name, path, column = c
        return ast.Sample(str(name), (), span=self.span(meta),
                          source=(str(path)[1:-1], self.token_span(path), str(column)[1:-1], self.token_span(column)))

    def e_over(self, meta, c):
        aggregate, variable, count, body = c
        span = self.span(meta)
        if str(aggregate) not in ("max", "min", "sum"):
            raise ProgramError(
                f"`{aggregate} {variable} in …` is not an aggregate: write max, min or sum",
                self.token_span(aggregate))
        return ast.Over(str(aggregate), str(variable), count, body, span=span)

    def count_num(self, meta, c):
        return ast.Num(float(str(c[0])), span=self.token_span(c[0]))

    def count_name(self, meta, c):
        span = self.token_span(c[0])
        return ast.Name(ast.Path((ast.PathPart(str(c[0]), None),), span=span), span=span)

    def count_expr(self, meta, c):
        return c[0]

    def e_cond(self, meta, c):
        return ast.Cond(c[0], c[1], c[2], span=self.span(meta))

    def binary(op):  # noqa: N805 - a factory of rule methods, used in the class body only
        def rule(self, meta, c):
            return ast.Binary(op, c[0], c[1], span=self.span(meta))
        return rule

    e_or = binary("Or")
    e_and = binary("And")
    e_lt = binary("Lt")
    e_le = binary("Le")
    e_gt = binary("Gt")
    e_ge = binary("Ge")
    e_eq = binary("Eq")
    e_ne = binary("Ne")
    e_add = binary("Add")
    e_sub = binary("Sub")
    e_mul = binary("Mul")
    e_div = binary("Div")
    e_pow = binary("Pow")
    del binary

    def e_neg(self, meta, c):
        return ast.Unary("Neg", c[0], span=self.span(meta))

    def e_not(self, meta, c):
        return ast.Unary("Not", c[0], span=self.span(meta))


def split_target(target) -> tuple[ast.Expr | None, tuple[ast.Path, ...] | None]:
    """A serving form's ``[e]`` or ``on S, ...`` as (index, stages)."""
    if target is None:
        return None, None
    kind, value = target
    return (value, None) if kind == "index" else (None, value)
