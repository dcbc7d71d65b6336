"""Name-level link errors of the front end: each bad program fails with a
ProgramError that says what to do and points at the offending construct.

The IR-level checks (moments, hidden reads, lints, run modes, ranges) are the
linker's (semantics/link) and are not repeated here.
"""

from __future__ import annotations

import os

import pytest

from semantics.compiler import compile_file, compile_source
from semantics.errors import ProgramError

RUN = "\nrun { horizon 10; }"

# (program, message pattern, line, column): the line and column of the span
BAD_PROGRAMS = [
    # unknown names
    ("session { set x = y + 1; }", "unknown name `y`", 1, 19),
    ("session { hold kb (1) { end; } }", "unknown pool `kb`", 1, 16),
    ("pool kv { cap 1; }\nsession { hold kb (1) { end; } }", r"unknown pool `kb` \(did you mean `kv`\?\)", 2, 16),
    ("session { run nowhere (1); }", "unknown stage `nowhere`", 1, 15),
    ("session { set x = fn(1); }", "unknown function `fn`", 1, 19),
    ("session { set x = ~gamma(1); }", "unknown distribution `~gamma`", 1, 19),
    ("session { set x = ~normal(1); }", "`~normal` takes 2", 1, 19),
    ("session { set x = ~uniform(1); }", r"`~uniform` takes 2 argument\(s\), got 1", 1, 19),
    ("session { set x = min(1); }", r"`min` takes 2 argument\(s\), got 1", 1, 19),
    ("pool kv { cap 1; }\nsession { set x = kv + 1; }", "`kv` is a pool, not a value", 2, 19),
    ("stage s : fifo;\nsession { set x = used(s); }", "`s` is a stage, and a pool is needed here", 2, 24),
    # families
    ("pool kv[2] { cap 1; }\nsession { hold kv (1) { end; } }", r"pool `kv` is a family of 2: index it", 2, 16),
    ("pool kv[2] { cap 1; }\nsession { hold kv[2] (1) { end; } }", r"pool `kv\[2\]` is out of range", 2, 19),
    ("let N = 2.5;\npool kv[N] { cap 1; }\nsession { end; }", "the size of family `kv` is 2.5", 2, 9),
    ("pool kv[serial] { cap 1; }\nsession { end; }", "must be a constant .* reads `serial`", 1, 9),
    ("stage gate[1e308] : fifo;\nsession { end; }", r"the size of family `gate` is 1e\+308: a family has at most 4096", 1, 12),
    ("pool kv[4097] { cap 1; }\nsession { end; }", r"the size of family `kv` is 4097: a family has at most 4096", 1, 9),
    # one name, one meaning
    ("let k = 1;\nsession { set k = 2; }", "`k` is both a let constant and a session attribute", 2, 11),
    ("session { set present = 2; }", "`present` is a name the language supplies", 1, 11),
    ("let now = 2;\nsession { end; }", "`now` is a name the language supplies", 1, 5),
    ("let serial = 2;\nsession { end; }", "`serial` is a built-in session attribute", 1, 5),
    ("let inf = 2;\nsession { end; }", "`inf` is a name the language supplies", 1, 5),
    ("def f(x) = x;\nlet f = 1;\nsession { end; }", "`f` is already a def", 2, 5),
    ("let B = 1;\nlet B = 2;\nsession { end; }", "let `B` is declared twice", 2, 5),
    ("def used(p) = 1;\nsession { end; }", "`used` is a function the language supplies", 1, 5),
    ("def tool(x) { end; }\nsession { end; }", "`tool` is a keyword of the language", 1, 5),
    ("def f(block) = block;\nsession { end; }", "`block` is a keyword of the language", 1, 5),
    ("pool kv { cap 1; }\npool kv { cap 2; }\nsession { end; }", "pool `kv` is declared twice", 2, 6),
    # constants
    ("let x = 0 / 0;\nsession { end; }", "let `x` is NaN", 1, 9),
    ("pool kv { cap inf - inf; }\nsession { end; }", "pool `kv`'s cap is NaN", 1, 15),
    ("pool kv { cap serial; }\nsession { end; }", "pool `kv`'s cap must be a constant", 1, 15),
    ("pool kv { block 0; }\nsession { end; }", "a block is positive", 1, 11),
    ("stage s : fifo(0);\nsession { end; }", "fifo server count is 0", 1, 16),
    # admit via, memory pairing
    ("stage s : fifo;\npool q { admit via s; }\nsession { end; }", "`admit via s` needs a step stage", 2, 20),
    ("stage S[3] : step { budget 1; cost 1; }\npool q[2] { admit via S; }\nsession { end; }",
     "`admit via` names a family of 3, and `q` is a family of 2", 2, 13),
    ("pool kv[3] { cap 1; }\nstage E[2] : step { budget 1; cost 1; memory kv; }\nsession { end; }",
     "`memory` names a family of 3", 2, 39),
    ("stage E : step { cost 1; }\nsession { end; }", "step stage `E` has no `budget`", 1, 11),
    # holds
    ("pool a { cap 1; } pool b { cap 1; }\nsession { hold a (1) { end; } lease b (1); }",
     "`lease b`: the hold does not take that pool", 2, 31),
    ("pool kv { cap 1; }\nsession { set x = blocksize(kv); }", "pool `kv` has no `block`", 2, 19),
    # statements that act on an enclosing hold (or, for release, a lease)
    ("pool kv { cap 9; }\nsession { grow kv (1); }", "`grow kv` outside a hold of `kv`", 2, 16),
    ("pool kv[2] { cap 9; }\nsession { hold kv[0] (1) { load kv[1] (1); } }",
     "write the pool as the hold does, index included", 2, 33),
    ("pool kv { cap 9; }\nsession { release kv; }", "or ends a lease of it", 2, 19),
    ("pool kv { cap 9; } stage e : step { budget 1; cost 1; }\nsession { run e prefill (1) growing kv; }",
     "`growing kv` outside a hold of `kv`", 2, 37),
    # aggregates
    ("let j = 1;\npool kv[2] { cap 1; }\ngauge g = max j in 2 (used(kv[j]));\nsession { end; }",
     "`max j in`: `j` is also a let constant", 3, 11),
    ("pool kv[2] { cap 1; }\ngauge g = sum kv in 2 (1);\nsession { end; }", "`sum kv in`: `kv` is also a pool", 2, 11),
    ("gauge g = max k in 0 (k);\nsession { end; }", "count is 0", 1, 20),
    # defs
    ("def f(a, b) = a + b;\nsession { set x = f(1); }", r"`f` takes 2 argument\(s\), got 1", 2, 19),
    ("def g(a) { end; }\nsession { set x = g(1); }", "`g` is a def of statements", 2, 19),
    ("def f(a) = a;\nsession { f(1); }", "`f` is an expression def", 2, 11),
    ("session { nothing(1); }", "no def named `nothing`", 1, 11),
    # queues and the serving vocabulary outside them
    ("stage s : fifo;\nsession { run (1); }", r"`run \(w\);` names no stage", 2, 11),
    ("session { mark m; }", "`mark` is for a queue's entry", 1, 11),
    ("queue Q : nothing { }\nsession { end; }", "`nothing` is not a role", 1, 7),
    ("queue Q : prefill { decode (p) { end; } }\nsession { end; }", "has no role with the entry `decode`", 1, 21),
    # the workload and the run block
    ("workload { hidden z; arrive poisson(1); session { request; } }\nserver { set y = 1; }",
     "hidden `z`: no set or choose makes it a session attribute", 1, 12),
    ("workload { arrive closed(1.5); }", "the closed population is 1.5", 1, 26),
    ("workload { init { end; } }", "a workload's init block only sets and observes", 1, 19),
]


@pytest.mark.parametrize("text, message, line, col", BAD_PROGRAMS)
def test_bad_program_is_a_located_program_error(text: str, message: str, line: int, col: int) -> None:
    with pytest.raises(ProgramError) as caught:
        compile_source(text + RUN, "bad.sq")
    error = caught.value
    assert caught.match(message)
    assert error.span is not None, error.message
    assert (error.span.file, error.span.line, error.span.col) == ("bad.sq", line, col), error.message


def test_no_horizon_is_not_the_front_ends_to_say() -> None:
    """Issue 13: a program without a run block compiles (a library, or one the command line completes);
    "no horizon" is said only by a command that runs (tests/test_diagnostics.py)."""
    program, smap = compile_source("session { end; }", "bad.sq")
    assert program.horizon == float("inf") and smap.settings == {}


def test_an_error_in_a_used_file_has_that_files_span(tmp_path) -> None:
    """The brief: "an error inside a used file has that file's span"."""
    lib = tmp_path / "lib"
    lib.mkdir()
    (lib / "defs.sq").write_text("let bs = 16;\ndef half(x) = x / 2;\npool kv { cap bs * q; }\n")
    main = tmp_path / "main.sq"
    main.write_text('use "lib/defs.sq";\nsession { end; }\nrun { horizon 1; }\n')
    with pytest.raises(ProgramError) as caught:
        compile_file(str(main))
    assert caught.value.span.file == os.path.normpath(str(lib / "defs.sq"))
    assert (caught.value.span.line, caught.value.span.col) == (3, 20)
    (lib / "defs.sq").write_text("let bs = 16;\ndef half(x) = x / 2;\npool kv { cap bs; }\n")
    program, _ = compile_file(str(main))
    assert program.pools[0].cap == 16.0


def test_use_of_a_missing_file(tmp_path) -> None:
    main = tmp_path / "main.sq"
    main.write_text('use "nowhere.sq";\nsession { end; }\nrun { horizon 1; }\n')
    with pytest.raises(ProgramError, match="cannot read `nowhere.sq`") as caught:
        compile_file(str(main))
    assert caught.value.span.line == 1


def test_a_use_cycle_reads_each_file_once(tmp_path) -> None:
    (tmp_path / "a.sq").write_text('use "b.sq";\nlet a = 1;\n')
    (tmp_path / "b.sq").write_text('use "a.sq";\nlet b = 2;\n')
    main = tmp_path / "main.sq"
    main.write_text('use "a.sq";\npool kv { cap a + b; }\nsession { end; }\nrun { horizon 1; }\n')
    program, _ = compile_file(str(main))
    assert program.pools[0].cap == 3.0


def test_deep_nesting_is_a_program_error_not_a_crash() -> None:
    """A thousand-term sum compiles; a block 50 000 levels deep is a ProgramError."""
    long_sum = "let x = 1" + " + 1" * 1000 + ";\nsession { set y = x" + " + x" * 1000 + "; }" + RUN
    compile_source(long_sum, "deep.sq")
    depth = 50000
    deep = "session {" + "loop {" * depth + "end;" + "}" * depth + "}" + RUN
    with pytest.raises(ProgramError, match="nests too deeply"):
        compile_source(deep, "deep.sq")
