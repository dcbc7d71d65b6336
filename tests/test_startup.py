"""Start-up: `serq-ref check` of a small program does only what it needs.

Issue 13: "`serq-ref check` on a four-line program takes 1.3-1.5 s: the LALR
tables are rebuilt on every run, the JSON Schema's own meta-validation runs
each time. Cache the parser tables (lark's own cache), build the validator
once without re-checking the schema, import what a command does not need
lazily: under 0.3 s for that check." The time itself is measured by
benchmarks/bench_startup.py (benchmarks/README.md has the figures); a test
of wall-clock time would fail on a busy machine, so these check the causes.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import lark

from semantics.syntax import parser

ROOT = Path(__file__).resolve().parents[1]

SMALL = """\
stage srv : fifo;
workload { arrive poisson(0.5); }
session { run srv (~exp(1)); }
run { horizon 100; }
"""

PROBE = """\
import sys
from semantics.cli import main
code = main(["check", sys.argv[1]])
heavy = sorted(m for m in ("z3", "jsonschema", "semantics.smallstep", "semantics.report", "semantics.codec")
               if m in sys.modules)
print("loaded:", ",".join(heavy))
sys.exit(code)
"""


def test_check_of_a_small_program_imports_neither_z3_nor_jsonschema_nor_the_engine(tmp_path):
    program = tmp_path / "small.sq"
    program.write_text(SMALL, encoding="utf-8")
    done = subprocess.run([sys.executable, "-c", PROBE, str(program)], capture_output=True, text=True,
                          env=dict(os.environ, PYTHONPATH=str(ROOT)), cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert "OK: 0 pool(s), 1 stage(s)" in done.stdout
    assert done.stdout.rstrip().endswith("loaded:")


def test_the_parser_tables_are_cached_by_the_grammars_hash(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    grammar = parser.GRAMMAR_FILE.read_text(encoding="utf-8")
    path = parser.get_cache_path(grammar)
    assert path.startswith(str(tmp_path / "serq-ref")) and lark.__version__ in path
    assert parser.get_cache_path(grammar + "\n// another grammar\n") != path
    parser.build_parser.cache_clear()
    try:
        parser.build_parser()
        assert os.path.getsize(path) > 0
        parser.build_parser.cache_clear()
        assert parser.parse_text(SMALL, "small.sq").items  # read back from the cache
    finally:
        parser.build_parser.cache_clear()


def test_an_unusable_cache_directory_is_no_error(tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocker))
    assert parser.get_cache_path("grammar") is True  # lark's own place in the temporary directory
