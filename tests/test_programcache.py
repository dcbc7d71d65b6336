"""The compiled-program cache (semantics/programcache.py): what it returns is
what the compiler returns, an edited file or serq-ref's own code misses, a
program that does not compile is never stored, a replay on a hit parses
nothing (issue 22 §4: the start-up of `serq-ref oracle replay`)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from semantics import programcache
from semantics.compiler import compile_file, compile_source
from semantics.errors import ProgramErrors, ProgramError
from semantics.syntax import parser

ROOT = Path(__file__).resolve().parents[1]
REPLAY = ROOT / "examples" / "oracle" / "vllm_replay.sq"

MAIN = 'use "lib.sq";\nworkload { arrive poisson(rate); }\nsession { run srv (~exp(1)); }\nrun { horizon 100; }\n'
LIB = "let rate = 0.5;\nstage srv : fifo;\n"


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """A cache directory of the test's own, the cache on."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.delenv("SERQ_REF_PROGRAM_CACHE", raising=False)
    return tmp_path / "cache" / "serq-ref" / "programs"


def no_compile(*args, **kwargs):
    raise AssertionError("compiled where the cache holds the program")


def entries(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.glob("*.pickle")) if directory.exists() else []


def test_the_replay_program_from_the_cache_is_the_compilers(cache, monkeypatch):
    sets = {"spacing": 24.0, "sessions": 3.0, "token_budget": 512.0}
    fresh = compile_file(str(REPLAY), sets=sets)
    first = programcache.compile_file_cached(str(REPLAY), sets=sets)  # a miss: compiled, stored
    assert len(entries(cache)) == 1
    monkeypatch.setattr("semantics.compiler.compile_source", no_compile)
    second = programcache.compile_file_cached(str(REPLAY), sets=sets)  # a hit
    assert first == fresh and second == fresh
    assert repr(second[0]) == repr(fresh[0]) and second[1].uses == fresh[1].uses
    assert any(path.endswith(os.path.join("lib", "vllm.sq")) for path in second[1].uses)
    # other sets are another program
    with pytest.raises(AssertionError, match="compiled where"):
        programcache.compile_file_cached(str(REPLAY), sets={**sets, "spacing": 12.0})


def test_an_edited_used_file_is_compiled_afresh(cache, tmp_path):
    main, lib = tmp_path / "main.sq", tmp_path / "lib.sq"
    main.write_text(MAIN, encoding="utf-8")
    lib.write_text(LIB, encoding="utf-8")
    program, _ = programcache.compile_file_cached(str(main))
    assert programcache.compile_file_cached(str(main)) == compile_file(str(main))
    lib.write_text(LIB.replace("0.5", "0.25"), encoding="utf-8")
    edited, _ = programcache.compile_file_cached(str(main))
    assert edited != program and (edited, _) == compile_file(str(main))
    lib.write_text("let rate = 0.5;\nstage srv : fifo;\nstage srv : fifo;\n", encoding="utf-8")
    with pytest.raises((ProgramError, ProgramErrors)):
        programcache.compile_file_cached(str(main))


def test_the_key_holds_the_text_the_sets_and_the_front_ends_code(cache, tmp_path, monkeypatch):
    name = programcache.entry_name(MAIN, "main.sq", None, None)
    assert programcache.entry_name(MAIN + " ", "main.sq", None, None) != name
    assert programcache.entry_name(MAIN, "other.sq", None, None) != name
    assert programcache.entry_name(MAIN, "main.sq", {"rate": 1.0}, None) != name
    assert programcache.entry_name(MAIN, "main.sq", None, 10) != name
    monkeypatch.setattr(programcache, "_front_end_digest", b"serq-ref edited")
    assert programcache.entry_name(MAIN, "main.sq", None, None) != name


def test_an_edit_of_serq_refs_source_changes_the_key(tmp_path, monkeypatch):
    package = tmp_path / "semantics"
    (package / "syntax").mkdir(parents=True)
    (package / "compiler.py").write_text("x = 1\n", encoding="utf-8")
    (package / "syntax" / "grammar.lark").write_text("start: NAME\n", encoding="utf-8")
    monkeypatch.setattr(programcache, "PACKAGE", str(package))
    digests = []
    for edit in ("x = 1\n", "x = 2\n", "x = 22\n"):
        (package / "compiler.py").write_text(edit, encoding="utf-8")
        os.utime(package / "compiler.py", ns=(len(digests), len(digests)))  # a new time, as an edit gives
        monkeypatch.setattr(programcache, "_front_end_digest", None)
        digests.append(programcache.front_end_digest())
    assert len(set(digests)) == 3
    os.utime(package / "syntax" / "grammar.lark", ns=(7, 7))
    monkeypatch.setattr(programcache, "_front_end_digest", None)
    assert programcache.front_end_digest() not in digests


def test_a_program_that_does_not_compile_is_never_stored(cache, tmp_path):
    bad = tmp_path / "bad.sq"
    bad.write_text("stage srv : fifo;\nsession { run nowhere (1); }\n", encoding="utf-8")
    for _ in range(2):
        with pytest.raises((ProgramError, ProgramErrors)) as cached:
            programcache.compile_file_cached(str(bad))
        with pytest.raises((ProgramError, ProgramErrors)) as compiled:
            compile_file(str(bad))
        assert str(cached.value) == str(compiled.value)
    assert entries(cache) == []


def test_an_empirical_draw_is_never_stored(cache, tmp_path):
    (tmp_path / "d.csv").write_text("x\n1\n2\n", encoding="utf-8")
    text = ('stage srv : fifo;\nworkload { arrive poisson(0.5); }\n'
            'session { run srv (~empirical("d.csv", "x")); }\nrun { horizon 10; }\n')
    got = programcache.compile_source_cached(text, str(tmp_path / "e.sq"))
    assert got == compile_source(text, str(tmp_path / "e.sq"))
    assert entries(cache) == []


def test_a_program_too_deep_to_pickle_is_compiled_and_not_stored(cache):
    text = ("stage srv : fifo;\nworkload { arrive poisson(0.5); }\n"
            f"session {{ run srv ({'+'.join(['1'] * 3000)}); }}\nrun {{ horizon 10; }}\n")
    program, _ = programcache.compile_source_cached(text, "deep.sq")  # the pickler's RecursionError is not raised
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(20000)  # comparing the two recurses as deep
    try:
        assert program == compile_source(text, "deep.sq")[0]
    finally:
        sys.setrecursionlimit(limit)
    assert entries(cache) == []


def test_the_directory_keeps_the_newest_entries(cache, monkeypatch):
    monkeypatch.setattr(programcache, "MAX_ENTRIES", 3)
    for k in range(5):
        programcache.compile_source_cached(MAIN.replace('use "lib.sq";\n', LIB).replace("0.5", f"0.{k + 1}"),
                                           "p.sq")
    assert len(entries(cache)) == 3


def test_off_reads_and_writes_nothing(cache, monkeypatch):
    monkeypatch.setenv("SERQ_REF_PROGRAM_CACHE", "0")
    assert programcache.compile_file_cached(str(REPLAY)) == compile_file(str(REPLAY))
    assert entries(cache) == []


def test_a_removed_working_directory_is_no_error(cache, tmp_path, monkeypatch):
    gone = tmp_path / "gone"
    gone.mkdir()
    monkeypatch.chdir(gone)
    gone.rmdir()
    text = MAIN.replace('use "lib.sq";\n', LIB)
    assert programcache.compile_source_cached(text, "p.sq") == compile_source(text, "p.sq")
    assert entries(cache) == []


def test_an_unreadable_entry_is_a_miss(cache):
    text = MAIN.replace('use "lib.sq";\n', LIB)
    programcache.compile_source_cached(text, "p.sq")
    [name] = entries(cache)
    (cache / name).write_bytes(b"not a pickle")
    assert programcache.compile_source_cached(text, "p.sq") == compile_source(text, "p.sq")


PROBE = """\
import sys
from semantics.cli import main
code = main(["oracle", "replay", sys.argv[1], "--sessions", "2", "--spacing", "24", "--budget", "512",
             "--max-seqs", "64", "--blocks", "8010"])
print("loaded:", ",".join(sorted(m for m in ("lark", "semantics.syntax.ast", "semantics.compiler", "oracle.scenario")
                                 if m in sys.modules)))
sys.exit(code)
"""


def test_a_replay_on_a_hit_neither_parses_nor_compiles(tmp_path):
    trace = tmp_path / "trace.csv"
    trace.write_text("session,turn,new,out,think,forced\n0,1,20,3,0,0\n0,2,5,2,0,0\n1,1,30,4,0,0\n", encoding="utf-8")
    tables = parser.get_cache_path(parser.GRAMMAR_FILE.read_text(encoding="utf-8"))
    if isinstance(tables, str) and os.path.exists(tables):  # lark's tables, not built again in the new directory
        (tmp_path / "cache" / "serq-ref").mkdir(parents=True)
        shutil.copy(tables, tmp_path / "cache" / "serq-ref")
    env = dict(os.environ, PYTHONPATH=str(ROOT), XDG_CACHE_HOME=str(tmp_path / "cache"))
    env.pop("SERQ_REF_PROGRAM_CACHE", None)
    runs = [subprocess.run([sys.executable, "-c", PROBE, str(trace)], capture_output=True, text=True, env=env,
                           cwd=ROOT) for _ in range(2)]
    for done in runs:
        assert done.returncode == 0, done.stderr
    assert runs[0].stdout.splitlines()[:-1] == runs[1].stdout.splitlines()[:-1]  # the same CSV
    assert runs[0].stdout.splitlines()[0] == "session,turn,sent,first,done,prompt,cached,out"
    assert runs[0].stdout.rstrip().endswith("loaded: lark,semantics.compiler,semantics.syntax.ast")  # a miss
    assert runs[1].stdout.rstrip().endswith("loaded:")  # a hit


def test_every_example_from_the_cache_is_the_compilers(cache, monkeypatch):
    """Every example program: the compiler's output (a miss, stored) and the entry read back (a hit) are equal,
    and print the same (what a pickle keeps of the IR and the source map is all of them)."""
    examples = sorted(ROOT.glob("examples/**/*.sq"))
    assert len(examples) >= 30
    compiled = {path: programcache.compile_file_cached(str(path)) for path in examples}
    monkeypatch.setattr("semantics.compiler.compile_source", no_compile)
    for path, (program, smap) in compiled.items():
        again, again_smap = programcache.compile_file_cached(str(path))
        assert again == program and again_smap == smap, path
        assert repr(again) == repr(program) and repr(again_smap) == repr(smap), path
