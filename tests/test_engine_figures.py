"""The step engine's figures (issue 21 §4; docs/reports.md, "The engine and
saturation"): tokens per iteration, the batch (sequences per iteration), the
fraction of the budget used, the preemptions and their rate, each on a
program whose value is known by hand; the engine table with its units and
the saturation note; a sweep over them; and a program without a step stage
keeps the RunResult it had (no engine counts in it)."""

import json
import os
import subprocess
import sys
from pathlib import Path

from semantics.compiler import compile_source
from semantics.report import build_report, format_text, to_json
from semantics.results import StageRecord, StepStageRecord
from semantics.smallstep.driver import run

ROOT = Path(__file__).resolve().parent.parent

#: One request on the step clock (cost 1): a prefill of 10 tokens under a budget of B, then 3 decode tokens.
#: With B = 8: iterations of 8 and 2 prefill tokens, then three of one decode token: 5 iterations, 13 tokens,
#: one sequence each, 5 x 8 = 40 budget tokens offered; busy 5 of the horizon's 10 time units.
ONE = """
let b = 8;
pool reqs { cap 1; admit via engine; }
stage engine : step { budget b; cost 1; }
workload { arrive batch(1); }
session {
  hold reqs (1) { prefill (10); decode (3); }
  end;
}
run { horizon 10; }
"""

#: Two requests whose growth does not fit three blocks of KV: each admission is followed by preemptions
#: (a livelock the pool names); the engine's count is the pool's, both counted from 0 here.
TWO = """
pool reqs { cap 2; admit via engine; }
pool kv { cap 3; preempt lifo; }
stage engine : step { budget 8; cost 1; memory kv; }
workload { arrive batch(2); }
session {
  hold reqs (1), kv (1) { prefill (1) growing kv; decode (3) growing kv; }
  end;
}
run { horizon 20; WARMUP }
"""


def result_of(source: str, **sets):
    program, _ = compile_source(source, "<test>", sets=sets)
    return run(program)


def engine_json(result) -> dict:
    return to_json(build_report(result))["stages"][0]


def test_tokens_batch_and_budget_of_one_request_by_hand():
    result = result_of(ONE)
    stage = result.stages[0]
    assert isinstance(stage, StepStageRecord)
    assert (stage.iterations, stage.tokens, stage.scheduled, stage.offered, stage.preemptions) == (5, 13.0, 5, 40.0, 0)
    figures = engine_json(result)
    assert figures["tokens_per_iteration"] == 13 / 5
    assert figures["mean_batch"] == 1.0
    assert figures["budget_used"] == 13 / 40
    assert figures["preemptions"] == 0 and figures["preemption_rate"] == 0.0
    assert figures["utilization"] == 0.5
    # a budget of 16 takes the prefill in one iteration: 4 iterations of 16, 13 tokens
    wide = engine_json(result_of(ONE, b=16))
    assert (wide["iterations"], wide["tokens_per_iteration"], wide["budget_used"]) == (4, 13 / 4, 13 / 64)


def test_the_engine_table_prints_each_figure_with_its_unit():
    lines = format_text(build_report(result_of(ONE))).split("\n")
    k = lines.index("engine  tokens/iter        batch  budget used  preempt   preempt/s        util  admits from"
                    "       queue    wait")
    assert lines[k + 1] == ("           (tokens)  (seqs/iter)   (fraction)  (count)  (per time)  (fraction)"
                            "       (pool)  (sessions)  (time)")
    assert lines[k + 3] == ("engine          2.6         1.00        0.325        0      0.0000       0.500"
                            "         reqs       0.000  0.0000")
    assert not any(line.startswith("note: step engine") for line in lines)  # util 0.5: no saturation note


def test_preemptions_are_the_pools_and_their_rate_is_per_time():
    result = result_of(TWO.replace("WARMUP", ""))
    kv = next(p for p in result.pools if p.name == "kv")
    figures = engine_json(result)
    assert kv.preemptions > 0
    assert figures["preemptions"] == kv.preemptions  # both count every preemption here (warm-up 0)
    assert figures["preemption_rate"] == kv.preemptions / 20
    # the batch: the residents the iterations served over the iterations (an empty one, that only preempted, is 0)
    stage = result.stages[0]
    assert figures["mean_batch"] == stage.scheduled / stage.iterations
    assert stage.scheduled == stage.tokens  # every run here takes one token an iteration (a prefill of 1, decodes)
    # saturated: util 1, and the note says where the queueing is
    text = format_text(build_report(result))
    assert "note: step engine: util 1.000 is the fraction of the time an iteration was in flight" in text
    assert "requests queue in the pools it admits from (reqs: queue 1.000" in text


def test_preemptions_are_counted_after_the_warm_up():
    whole = engine_json(result_of(TWO.replace("WARMUP", "")))
    warm = result_of(TWO.replace("WARMUP", "warmup 10;"))
    late = engine_json(warm)
    kv = next(p for p in warm.pools if p.name == "kv")
    assert kv.preemptions == whole["preemptions"]  # the pool's count is the whole run's (docs/reports.md)
    assert 0 < late["preemptions"] < whole["preemptions"]
    assert late["preemption_rate"] == late["preemptions"] / 10


def test_a_program_without_a_step_stage_has_no_engine_counts():
    result = result_of("""
stage cpu : fifo;
workload { arrive batch(2); }
session { run cpu (2); end; }
run { horizon 10; }
""")
    assert type(result.stages[0]) is StageRecord  # the digest's RunResult bytes of such programs are unchanged
    figures = engine_json(result)
    assert all(figures[name] is None for name in ("tokens_per_iteration", "mean_batch", "budget_used",
                                                  "preemptions", "preemption_rate"))
    assert "tokens/iter" not in format_text(build_report(result))


def test_a_sweep_plots_and_tabulates_the_engine_figures(tmp_path):
    path = tmp_path / "one.sq"
    path.write_text(ONE)
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    done = subprocess.run([sys.executable, "-m", "semantics", "sweep", str(path), "--set", "b=8,16", "--json",
                           "--y", "stage.engine.budget_used,stage.engine.tokens_per_iteration,stage.engine.mean_batch"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    points = json.loads(done.stdout)["points"]
    assert [p["figures"]["stage.engine.budget_used"]["mean"] for p in points] == [13 / 40, 13 / 64]
    assert [p["figures"]["stage.engine.tokens_per_iteration"]["mean"] for p in points] == [13 / 5, 13 / 4]
    table = subprocess.run([sys.executable, "-m", "semantics", "sweep", str(path), "--set", "b=8,16",
                            "--y", "stage.engine.budget_used,stage.engine.mean_batch"],
                           cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert table.returncode == 0, table.stderr
    assert "(fraction)" in table.stdout and "(seqs/iter)" in table.stdout
