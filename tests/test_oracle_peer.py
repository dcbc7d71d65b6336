"""oracle.peer: our IR (version 13) as pyserq (IR version 14) reads it.

The two differences for the programs both run: a choose's count is an
expression there, and a run over several stages names the program's share
(FORMAT.md gives version 13; pyserq's reader asks for the rest).
"""

from __future__ import annotations

from oracle.peer import PYSERQ_IR_VERSION, encode_for_pyserq, report_of
from semantics.compiler import compile_source

PROGRAM = """
stage a : ps(1);
stage b : ps(2);
share maxmin;
workload { arrive batch(2); }
session {
  choose k in 3 by (k == 1 ? 0 : 1);
  run a, b (1);
  observe picked = k;
}
run { horizon 10; }
"""


def test_the_encoding_changes_the_version_the_choose_count_and_the_share_only():
    program, _ = compile_source(PROGRAM, "<peer>")
    encoded = encode_for_pyserq(program)
    assert encoded["version"] == PYSERQ_IR_VERSION == 14
    statements = [s for block in encoded["blocks"] for s in block if isinstance(s, dict)]
    chooses = [s["Choose"] for s in statements if "Choose" in s]
    runs = [s["Run"] for s in statements if "Run" in s]
    assert [c["count"] for c in chooses] == [{"Num": 3.0}]
    assert [r["share"] for r in runs] == ["MaxMin"]


def test_pyserq_runs_the_encoded_program():
    program, _ = compile_source(PROGRAM, "<peer>")
    report = report_of(program)
    assert report["arrivals"] == 2 and report["observes"]["picked"]["mean"] == 1.0
