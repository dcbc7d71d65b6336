"""How the linker speaks: source terms for the IR's parts, and where a finding is.

A link error names the construct as the program's author wrote it (`tokens`,
not `Ntok`; the pool `kv`, the attribute `prompt`), and puts it at a place: the
span the front end recorded in the SourceMap, or, for an IR loaded from JSON
(no spans), the IR path of the part (``blocks[2][3] (Hold)``) at the head of
the message.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .. import ir
from ..errors import ProgramError, Span, Warning_
from ..sourcemap import SourceMap

# --------------------------------------------------------------------------
# Expressions in source syntax
# --------------------------------------------------------------------------

#: Binary operators as the source writes them (Pow is the function pow).
BINARY_SPELLINGS: dict[str, str] = {
    "Add": "+",
    "Sub": "-",
    "Mul": "*",
    "Div": "/",
    "Lt": "<",
    "Le": "<=",
    "Gt": ">",
    "Ge": ">=",
    "Eq": "==",
    "Ne": "!=",
    "And": "&&",
    "Or": "||",
}


def format_number(x: float) -> str:
    """A number as the source writes it: ``3``, ``0.25``, ``inf``."""
    if math.isnan(x):
        return "nan"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    if x == int(x) and abs(x) < 1e15:
        return str(int(x))
    return f"{x:.6g}"


def name_attribute(program: ir.Program, slot: int) -> str:
    if 0 <= slot < len(program.attrs):
        return program.attrs[slot]
    return f"attribute #{slot}"


def name_member(declared: tuple[ir.Pool, ...] | tuple[ir.Stage, ...], base: int) -> str:
    """A pool or stage by its declared name; a lone member of an array with its index."""
    if not 0 <= base < len(declared):
        return f"#{base}"
    item = declared[base]
    return item.name if item.index is None else f"{item.name}[{item.index}]"


def name_pool(program: ir.Program, base: int) -> str:
    return name_member(program.pools, base)


def name_stage(program: ir.Program, base: int) -> str:
    return name_member(program.stages, base)


def show_ref(program: ir.Program, ref: ir.Ref, declared: tuple[ir.Pool, ...] | tuple[ir.Stage, ...]) -> str:
    """``kv``, ``kv[0]`` or ``kv[j]``: a reference as written."""
    if ref.index is None:
        return name_member(declared, ref.base)
    family = declared[ref.base].name if 0 <= ref.base < len(declared) else f"#{ref.base}"
    return f"{family}[{show_expr(program, ref.index)}]"


def show_pool_ref(program: ir.Program, ref: ir.Ref) -> str:
    return show_ref(program, ref, program.pools)


def show_stage_ref(program: ir.Program, ref: ir.Ref) -> str:
    return show_ref(program, ref, program.stages)


def show_arg(program: ir.Program, arg: ir.Arg) -> str:
    return SHOW_ARG[type(arg)](program, arg)


def show_operand(program: ir.Program, e: ir.Expr) -> str:
    """An operand of an operator, parenthesised unless it is atomic."""
    text = show_expr(program, e)
    if isinstance(e, ir.Cost):
        return show_operand(program, e.expr)
    if isinstance(e, (ir.Binary, ir.Cond)) or (isinstance(e, ir.Num) and e.value < 0):
        return f"({text})"
    return text


def show_expr(program: ir.Program, e: ir.Expr) -> str:
    """An IR expression in the source's syntax, for messages: the printer
    ``SHOW_EXPR`` has for its node (tests/test_ir_declaration.py: one for every
    member of the declared ``Expr`` union)."""
    return SHOW_EXPR[type(e)](program, e)


def show_binary(program: ir.Program, e: ir.Binary) -> str:
    if e.op == "Pow":
        return f"pow({show_expr(program, e.left)}, {show_expr(program, e.right)})"
    return f"{show_operand(program, e.left)} {BINARY_SPELLINGS[e.op]} {show_operand(program, e.right)}"


def show_sample(program: ir.Program, e: ir.Sample) -> str:
    spelling = ir.DISTRIBUTIONS[e.dist][0]
    if ir.DISTRIBUTIONS[e.dist][1] is None:  # ~empirical: its values, the first few
        shown = ", ".join(show_expr(program, a) for a in e.args[:3]) + (", …" if len(e.args) > 3 else "")
        return f"~{spelling}({shown}: {len(e.args)} values)"
    return f"~{spelling}({', '.join(show_expr(program, a) for a in e.args)})"


#: The printer of each expression node: the dispatch of ``show_expr``.
SHOW_EXPR = {
    ir.Num: lambda program, e: format_number(e.value),
    ir.Attr: lambda program, e: name_attribute(program, e.slot),
    ir.Ctx: lambda program, e: ir.CONTEXT_VARIABLES[e.var],
    ir.Sample: lambda program, e: show_sample(program, e),
    ir.Call: lambda program, e: f"{ir.FUNCTIONS[e.fun][0]}({', '.join(show_arg(program, a) for a in e.args)})",
    ir.Unary: lambda program, e: f"{'-' if e.op == 'Neg' else '!'}{show_operand(program, e.operand)}",
    ir.Binary: show_binary,
    ir.Cond: lambda program, e: (f"{show_operand(program, e.test)} ? {show_operand(program, e.then)} : "
                                 f"{show_operand(program, e.otherwise)}"),
    ir.Cost: lambda program, e: show_expr(program, e.expr),
}
#: The printer of each argument node of a call.
SHOW_ARG = {
    ir.ExprArg: lambda program, a: show_expr(program, a.expr),
    ir.PoolArg: lambda program, a: show_pool_ref(program, a.ref),
    ir.StageArg: lambda program, a: show_stage_ref(program, a.ref),
}


def describe_stage_kind(stage: ir.Stage) -> str:
    """``a step stage``, ``a ps stage``, ``a fifo stage``, for messages."""
    return {ir.Step: "a step stage", ir.Ps: "a ps stage", ir.Fifo: "a fifo stage"}[type(stage.kind)]


# --------------------------------------------------------------------------
# Where a finding is
# --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Site:
    """Where a finding is reported: a span (None without a source map) and the
    IR path of the part, which heads the message when there is no span."""

    span: Span | None
    path: str


def locate_statement(program: ir.Program, smap: SourceMap, block: int, index: int) -> Site:
    stmt = program.blocks[block][index]
    return Site(smap.stmts.get((block, index)), f"blocks[{block}][{index}] ({type(stmt).__name__})")


def locate_pool(program: ir.Program, smap: SourceMap, index: int) -> Site:
    return Site(smap.pools.get(index), f"pools[{index}] ({name_pool(program, index)})")


def locate_stage(program: ir.Program, smap: SourceMap, index: int) -> Site:
    return Site(smap.stages.get(index), f"stages[{index}] ({name_stage(program, index)})")


def locate_gauge(program: ir.Program, smap: SourceMap, index: int) -> Site:
    return Site(smap.gauges.get(index), f"gauges[{index}] ({program.gauges[index].name})")


def locate_program(path: str, span: Span | None = None) -> Site:
    """A whole-program fact (``hidden``, ``arrival``, ``init``)."""
    return Site(span, path)


def mention(site: Site) -> str:
    """A second place named inside a message: ``line 12`` or its IR path."""
    if site.span is not None:
        return f"line {site.span.line}"
    return site.path


def make_error(smap: SourceMap, site: Site, message: str) -> ProgramError:
    text = message if site.span is not None else f"{site.path}: {message}"
    return ProgramError(text, span=site.span, file=smap.file)


def make_warning(smap: SourceMap, site: Site, message: str) -> Warning_:
    text = message if site.span is not None else f"{site.path}: {message}"
    return Warning_(text, site.span, smap.file if site.span is None else site.span.file)
