"""`share prefixes;` and `content (K : L, ...)` (docs/design/shared-prefixes.md,
sections 3 and 4): parsed, printed by fmt, lowered to IR fields that the JSON
writes only when set, and linked: a content clause where no pool of the hold
shares is a located error, and a sharing pool needs `block` and `evict lru`."""

from __future__ import annotations

import json

import pytest

from semantics import ir
from semantics.cli import main
from semantics.codec import dumps, loads

PROGRAM = """\
pool kv { cap 1000; block 16; evict lru; share prefixes; }
stage gpu : ps(1);
workload { arrive poisson(1); init { set sys = 1; } }
session {
  hold kv (64) reuse (48) content (sys : 32, 2 : 16) {
    run gpu (1);
  } cache (64);
  end;
}
run { horizon 100; }
"""


def run_cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def write(tmp_path, text: str, name: str = "p.sq") -> str:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return str(path)


def ir_of(capsys, tmp_path, text: str) -> dict:
    code, out, err = run_cli(capsys, "ir", write(tmp_path, text))
    assert code == 0, err
    return json.loads(out)


def test_the_ir_carries_the_pool_option_and_the_segments(capsys, tmp_path):
    data = ir_of(capsys, tmp_path, PROGRAM)
    assert data["pools"][0]["share_prefixes"] is True
    hold = next(s["Hold"] for b in data["blocks"] for s in b if isinstance(s, dict) and "Hold" in s)
    assert len(hold["content"]) == 2 and hold["content"][1] == [{"Num": 2.0}, {"Num": 16.0}]
    program = loads(json.dumps(data))
    assert program.pools[0].share_prefixes
    held = next(s for b in program.blocks for s in b if isinstance(s, ir.Hold))
    assert held.content[1] == ir.Segment(ir.Num(2.0), ir.Num(16.0))
    assert json.loads(dumps(program)) == data


def test_a_program_without_them_writes_neither_field(capsys, tmp_path):
    text = PROGRAM.replace(" share prefixes;", "").replace(" content (sys : 32, 2 : 16)", "")
    out = json.dumps(ir_of(capsys, tmp_path, text))
    assert "share_prefixes" not in out and "content" not in out


def test_fmt_prints_both_in_place(capsys, tmp_path):
    code, out, err = run_cli(capsys, "fmt", write(tmp_path, PROGRAM))
    assert code == 0, err
    assert "  share prefixes;\n" in out
    assert "hold kv (64) reuse (48) content (sys : 32, 2 : 16) {" in out
    code, again, _ = run_cli(capsys, "fmt", write(tmp_path, out, "q.sq"))
    assert code == 0 and again == out


@pytest.mark.parametrize("change, line, col, message", [
    ((" share prefixes;", ""), 5, 3, "`content` on a hold on `kv`, none of whose pools shares prefixes"),
    (("evict lru;", "evict by (age);"), 1, 6, "pool `kv` shares prefixes and needs `evict lru`"),
    (("block 16;", ""), 1, 6, "pool `kv` shares prefixes and needs `block`"),
    (("content (sys : 32, 2 : 16)", "content (sys 32)"), 5, 40, "expected"),
    (("content (sys : 32, 2 : 16)", "content ()"), 5, 36, "expected"),
])
def test_bad_inputs_are_located_errors_exit_1(capsys, tmp_path, change, line, col, message):
    path = write(tmp_path, PROGRAM.replace(*change))
    code, out, err = run_cli(capsys, "check", path)
    assert code == 1 and out == ""
    assert f"{path}:{line}:{col}: error: " in err and message in err
    assert "Traceback" not in err and "^" in err


def test_content_reads_the_at_admission_bindings(capsys, tmp_path):
    text = PROGRAM.replace("content (sys : 32, 2 : 16) {", "content (k : 32) at admission (k = sys + 1) {")
    data = ir_of(capsys, tmp_path, text)
    hold = next(s["Hold"] for b in data["blocks"] for s in b if isinstance(s, dict) and "Hold" in s)
    assert hold["content"][0][0] == {"Binary": ["Add", {"Attr": 9}, {"Num": 1.0}]}


# `share prefixes when (e);`: a constant condition, as `schedule ahead when (e)` and `defer free when (e)` take
# (examples/lib/vllm.sq writes it so --set offload_chunks / sliding_window switch it on); 0 is off.
SWITCHED = PROGRAM.replace("pool kv {", "let sharing = 1;\npool kv {").replace(
    " share prefixes;", " share prefixes when (sharing > 0);")


def test_share_prefixes_when_on_off_and_switched_by_set(capsys, tmp_path):
    data = ir_of(capsys, tmp_path, PROGRAM.replace(" share prefixes;", " share prefixes when (1);"))
    assert data["pools"][0]["share_prefixes"] is True
    unshared = PROGRAM.replace(" share prefixes;", " share prefixes when (2 - 2);").replace(
        " content (sys : 32, 2 : 16)", "")
    assert "share_prefixes" not in json.dumps(ir_of(capsys, tmp_path, unshared))
    assert ir_of(capsys, tmp_path, SWITCHED)["pools"][0]["share_prefixes"] is True
    path = write(tmp_path, SWITCHED.replace(" content (sys : 32, 2 : 16)", ""))
    code, out, err = run_cli(capsys, "ir", path, "--set", "sharing=0")
    assert code == 0, err
    assert "share_prefixes" not in out
    # switched off, the content clause has no sharing pool: the link error names it, as with no option at all
    code, out, err = run_cli(capsys, "check", write(tmp_path, SWITCHED, "s.sq"), "--set", "sharing=0")
    assert code == 1 and "none of whose pools shares prefixes" in err


def test_fmt_keeps_the_condition_as_written(capsys, tmp_path):
    code, out, err = run_cli(capsys, "fmt", write(tmp_path, SWITCHED))
    assert code == 0, err
    assert "  share prefixes when (sharing > 0);\n" in out
    code, again, _ = run_cli(capsys, "fmt", write(tmp_path, out, "q.sq"))
    assert code == 0 and again == out


def test_a_condition_that_is_not_constant_is_a_located_error(capsys, tmp_path):
    path = write(tmp_path, PROGRAM.replace(" share prefixes;", " share prefixes when (sys);"))
    code, out, err = run_cli(capsys, "check", path)
    assert code == 1 and out == ""
    assert f"{path}:1:63: error: pool `kv`: the condition of `share prefixes` must be a constant" in err
    assert "Traceback" not in err and "^" in err
