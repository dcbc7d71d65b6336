"""Section 8's table (seed 002 §8, issue 10): examples/replay/vllm_replay.sq
on the full short-context trace (333 sessions, 3 321 requests) with the A100
cost model (lib/vllm.sq's defaults: c_it = 4 ms and the fitted d, e, a, b of
../shared/oracle/a100/step_fit.json) and c0 = 40 ms gives the seed's model
column: mean TTFT within 5 % and full-hit rate within 0.02 at spacings 5,
4.2, 3.5 and 3.0 s, the collapse at 2.5 s as a collapse, and the pinned
variant (the same program without `admit via` on the request pool) at 3.0
and 2.5 s.

The pinned variant is the program compiled from the same text with one
option removed from the IR: pool `reqs`'s `admit via engine`
(``without_admit_via``). lib/vllm.sq cannot say it with a constant (`admit
via` is a pool option, not an expression), and a second copy of the library
or of the replay would be a second source of truth; seed 002 §8 calls it "the
same program without admit via engine".

Run as a script it reproduces the rows (docs/section8.md):

    PYTHONPATH=$PWD python3 tests/test_section8.py [--row NAME]... [--record]

prints each row's figures and run time, and with ``--record`` rewrites
docs/data/section8.json (figures and commands, each row on pyserq too, and
its sensitivity to c_it on pyserq; no times: the same code gives the same
file byte for byte).

In the default suite: the pinned transform, the recorded table against the
seed's model column, the 5 s row run here against the record, and every row
on pyserq (the reference implementation's engine, 0.3 s a row) against the
record. Behind the campaign marker: every other row run here against the
record (20-30 s each).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import subprocess
import sys
import time
from pathlib import Path
from typing import NamedTuple

import pytest

ROOT = Path(__file__).resolve().parent.parent
if __name__ == "__main__":  # run as a script: the package and the tests' helpers from this tree
    sys.path[:0] = [str(ROOT), str(ROOT / "tests")]

from semantics import ir  # noqa: E402
from semantics.link import link  # noqa: E402
from semantics.pipeline import Overrides, load  # noqa: E402
from semantics.fast import run  # noqa: E402

PROGRAM = ROOT / "examples/replay/vllm_replay.sq"
RECORD = ROOT / "docs/data/section8.json"
#: The program's own horizon (700 s) is for its default 40 sessions; the full
#: trace's last session starts at 332 x spacing (1 660 s at 5 s) and every
#: row ends well before 3 000 s (the tests check all 3 321 requests ran).
HORIZON = 3000.0
#: Section 8's rows run the synchronous engine (lib/vllm.sq's async_scheduling = 0): the seed's model has no
#: asynchronous scheduling (seed 002 §7), and c_it = 4 ms is its calibration of the part of the per-step constant
#: the served path's asynchronous scheduling does not hide (docs/section8.md, docs/design/async-scheduling.md).
SYNCHRONOUS = 0.0
SESSIONS = 333
REQUESTS = 3321  # the trace's rows (seed 002 §7: "3 321 requests")
FOLLOW_UPS = 2988  # turns 2 and later (none forced): the turns full-hit is taken over
TTFT_TOLERANCE = 0.05  # relative (issue 10)
FULL_HIT_TOLERANCE = 0.02  # absolute
#: A collapse (seed 002 §8: 39.1 s / 0.192 model, 34.6 s / 0.216 measured):
#: mean TTFT above 10 s and full-hit below 0.4, where every row that does not
#: collapse is under 1 s and above 0.75.
COLLAPSE_TTFT = 10.0
COLLAPSE_FULL_HIT = 0.4


class Row(NamedTuple):
    name: str
    spacing: float
    pinned: bool  # the request pool without `admit via engine`
    model: tuple[float, float]  # seed 002 §8: the model's (or pre-registered prediction's) TTFT s, full-hit
    measured: tuple[tuple[float, ...], tuple[float, ...]]  # the served A100 runs: TTFTs, full-hits
    collapse: bool  # the seed's model collapses there


#: Seed 002 §8, the table "run / TTFT measured / model / full-hit measured /
#: model" and the pre-registered predictions (the pinned rows' measured
#: figures are the traced runs of that table).
ROWS = (
    Row("5 s", 5.0, False, (0.168, 0.947), ((0.177,), (0.966,)), False),
    Row("4.2 s", 4.2, False, (0.264, 0.878), ((0.236,), (0.935,)), False),
    Row("3.5 s", 3.5, False, (0.422, 0.821), ((0.507, 0.473), (0.839, 0.840)), False),
    Row("3.0 s", 3.0, False, (0.605, 0.775), ((0.473, 0.441), (0.828, 0.832)), False),
    Row("2.5 s", 2.5, False, (39.1, 0.192), ((34.6,), (0.216,)), True),
    Row("3.0 s pinned", 3.0, True, (0.483, 0.792), ((0.413,), (0.838,)), False),
    Row("2.5 s pinned", 2.5, True, (0.888, 0.752), ((0.878,), (0.784,)), False),
)  # fmt: skip
BY_NAME = {row.name: row for row in ROWS}

#: Rows outside the tolerance: the reason (docs/section8.md) and the relative
#: TTFT difference the tests hold them to instead of 5 % (full-hit stays
#: within 0.02).
OUTSIDE = {
    "2.5 s pinned": ("mean TTFT 5.7 % under the seed's 0.888 s; at this load the model's mean TTFT moves between "
                     "0.68 and 0.93 s as c_it moves between 3.8 and 4.2 ms (docs/section8.md)", 0.10),
}


def _spacing_text(spacing: float) -> str:
    return f"{spacing:g}"


def command(row: Row) -> str:
    """The command that reproduces the row (run from the repository's root)."""
    if row.pinned:
        return f"PYTHONPATH=$PWD python3 tests/test_section8.py --row '{row.name}'"
    return (f"PYTHONPATH=$PWD python3 -m semantics run examples/replay/vllm_replay.sq --set sessions={SESSIONS} "
            f"--set spacing={_spacing_text(row.spacing)} --set async_scheduling=0 --horizon {HORIZON:g}")


def without_admit_via(program: ir.Program, pool: str) -> ir.Program:
    """The same program with pool ``pool`` admitted at settle time, as soon as
    it fits, instead of by its step stage's scheduler (`admit via` removed)."""
    names = [p.name for p in program.pools]
    assert names.count(pool) == 1, f"pool {pool} is not one pool of the program"
    return dataclasses.replace(
        program, pools=tuple(dataclasses.replace(p, admit_via=None) if p.name == pool else p for p in program.pools)
    )


def load_row(row: Row, sets: tuple[tuple[str, float], ...] = ()) -> tuple[ir.Program, str]:
    """The row's program, loaded as `serq-ref run` loads it (compiled with the
    row's --set values and ``sets``, the horizon overridden, validated and
    linked), and the directory its trace is read from."""
    sets = (("sessions", SESSIONS), ("spacing", row.spacing), ("async_scheduling", SYNCHRONOUS)) + sets
    loaded = load(str(PROGRAM), Overrides(horizon=HORIZON, sets=sets))
    program = loaded.program
    if row.pinned:
        program = without_admit_via(program, "reqs")
        link(program, loaded.smap)  # the variant is a program of its own: linked again
    return program, loaded.base_dir


def figures_of(samples: dict[str, list[float]]) -> dict:
    ttft, full_hit = samples["ttft"], samples["full_hit"]
    return {
        "ttft": math.fsum(ttft) / len(ttft),
        "full_hit": math.fsum(full_hit) / len(full_hit),
        "requests": len(ttft),
        "follow_ups": len(full_hit),
    }


def run_here(row: Row) -> dict:
    """The row on this project's small-step engine."""
    program, base_dir = load_row(row)
    result = run(program, base_dir=base_dir)
    return figures_of({record.name: [value for *_, value in record.samples] for record in result.observes})


def run_on_pyserq(row: Row, sets: tuple[tuple[str, float], ...] = ()) -> dict:
    """The same IR on pyserq (the reference implementation's engine, a test-only peer)."""
    from test_examples import run_on_reference_engine

    program, base_dir = load_row(row, sets)
    program = dataclasses.replace(program, trace=str(Path(base_dir) / program.trace))
    report = run_on_reference_engine(program)
    ttft, full_hit = report.observe("ttft"), report.observe("full_hit")
    return {"ttft": ttft.mean, "full_hit": full_hit.mean, "requests": ttft.count, "follow_ups": full_hit.count}


def collapsed(figures: dict) -> bool:
    return figures["ttft"] > COLLAPSE_TTFT and figures["full_hit"] < COLLAPSE_FULL_HIT


def compare(row: Row, figures: dict) -> dict:
    ttft, full_hit = row.model
    return {
        "ttft_relative": figures["ttft"] / ttft - 1.0,
        "full_hit": figures["full_hit"] - full_hit,
        "within_tolerance": abs(figures["ttft"] / ttft - 1.0) <= TTFT_TOLERANCE
        and abs(figures["full_hit"] - full_hit) <= FULL_HIT_TOLERANCE,
        "collapsed": collapsed(figures),
    }


def read_record() -> dict:
    return json.loads(RECORD.read_text(encoding="utf-8"))


def recorded(row: Row) -> dict:
    return next(r for r in read_record()["rows"] if r["row"] == row.name)


# --------------------------------------------------------------------------
# The pinned variant
# --------------------------------------------------------------------------


def test_the_pinned_variant_is_the_program_without_admit_via_alone():
    plain, _ = load_row(BY_NAME["3.0 s"])
    pinned, _ = load_row(BY_NAME["3.0 s pinned"])
    reqs = next(i for i, p in enumerate(plain.pools) if p.name == "reqs")
    assert plain.stages[plain.pools[reqs].admit_via].name == "engine"  # the library's vLLM rule
    assert pinned.pools[reqs].admit_via is None
    assert dataclasses.replace(pinned, pools=plain.pools) == plain  # nothing else differs
    assert [p for i, p in enumerate(pinned.pools) if i != reqs] == [p for i, p in enumerate(plain.pools) if i != reqs]


# --------------------------------------------------------------------------
# The recorded table
# --------------------------------------------------------------------------


def test_the_record_has_every_row_of_the_seed_with_its_command():
    record = read_record()
    assert [r["row"] for r in record["rows"]] == [row.name for row in ROWS]
    for row, r in zip(ROWS, record["rows"]):
        assert (r["spacing"], r["pinned"], r["command"]) == (row.spacing, row.pinned, command(row))
        assert (r["seed_model"]["ttft"], r["seed_model"]["full_hit"]) == row.model
        assert (tuple(r["seed_measured"]["ttft"]), tuple(r["seed_measured"]["full_hit"])) == row.measured
        assert r["serq_ref"]["requests"] == REQUESTS and r["serq_ref"]["follow_ups"] == FOLLOW_UPS
        assert r["difference"] == compare(row, r["serq_ref"])


def holds_the_model_column(row: Row, figures: dict) -> None:
    ttft, full_hit = row.model
    if row.collapse:
        assert collapsed(figures), f"{row.name}: {figures} is not a collapse"
        return
    assert not collapsed(figures)
    assert figures["ttft"] < 1.0 and figures["full_hit"] > 0.75
    assert figures["full_hit"] == pytest.approx(full_hit, abs=FULL_HIT_TOLERANCE)
    if row.name in OUTSIDE:  # outside 5 % (a row that comes within fails until OUTSIDE and the docs say so)
        _, bound = OUTSIDE[row.name]
        assert figures["ttft"] != pytest.approx(ttft, rel=TTFT_TOLERANCE)
        assert figures["ttft"] == pytest.approx(ttft, rel=bound)
        return
    assert figures["ttft"] == pytest.approx(ttft, rel=TTFT_TOLERANCE)


@pytest.mark.parametrize("row", ROWS, ids=lambda row: row.name)
def test_the_recorded_row_holds_the_seeds_model_column(row: Row):
    """Within 5 % on TTFT and 0.02 on full-hit; the 2.5 s row collapses; a row
    in OUTSIDE is held to its own bound and to being outside 5 %."""
    holds_the_model_column(row, recorded(row)["serq_ref"])


def test_pinning_prevents_the_collapse_in_the_record():
    """Seed 002 §8, H-pin: with the waiting request's prefix pinned the 2.5 s
    replay does not collapse; the cliff of the vLLM rule lies between 3.0 and 2.5 s."""
    figures = {row.name: recorded(row)["serq_ref"] for row in ROWS}
    assert collapsed(figures["2.5 s"]) and not collapsed(figures["2.5 s pinned"])
    assert not collapsed(figures["3.0 s"])
    assert figures["2.5 s pinned"]["full_hit"] > figures["2.5 s"]["full_hit"] + 0.5


# --------------------------------------------------------------------------
# The rows run again
# --------------------------------------------------------------------------


def same_figures(got: dict, want: dict, rel: float) -> None:
    assert (got["requests"], got["follow_ups"]) == (want["requests"], want["follow_ups"]) == (REQUESTS, FOLLOW_UPS)
    assert got["ttft"] == pytest.approx(want["ttft"], rel=rel)
    assert got["full_hit"] == pytest.approx(want["full_hit"], rel=rel)


#: The fast row runs in the default suite (about 6 s of one core).
FAST = ("5 s",)


@pytest.mark.parametrize("name", FAST)
def test_the_row_runs_here_as_recorded(name: str):
    row = BY_NAME[name]
    figures = run_here(row)
    same_figures(figures, recorded(row)["serq_ref"], rel=1e-12)  # deterministic: an ordered trace, no draws
    holds_the_model_column(row, figures)


@pytest.mark.campaign
@pytest.mark.parametrize("name", [row.name for row in ROWS if row.name not in FAST])
def test_the_long_row_runs_here_as_recorded(name: str):
    row = BY_NAME[name]
    figures = run_here(row)
    same_figures(figures, recorded(row)["serq_ref"], rel=1e-12)
    holds_the_model_column(row, figures)


#: pyserq reads the cost's residents, decoders and kv_decode after admission
#: and growth, serq-ref before the iteration (docs/design/step-engine.md Q1);
#: on this program they differ only for a decoder crossing a block boundary
#: in the iteration, which moves a figure by a few parts in a million.
PEER_TOLERANCE = 1e-5


@pytest.mark.parametrize("row", ROWS, ids=lambda row: row.name)
def test_pyserq_gives_the_recorded_figures(row: Row):
    same_figures(run_on_pyserq(row), recorded(row)["serq_ref"], rel=PEER_TOLERANCE)


# --------------------------------------------------------------------------
# As a script: reproduce rows, record the table
# --------------------------------------------------------------------------


def head_commit() -> str:
    out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True)
    return out.stdout.strip()


def record_row(row: Row) -> tuple[dict, float, float]:
    wall, cpu = time.perf_counter(), time.process_time()
    figures = run_here(row)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    entry = {
        "row": row.name,
        "spacing": row.spacing,
        "pinned": row.pinned,
        "command": command(row),
        "seed_measured": {"ttft": list(row.measured[0]), "full_hit": list(row.measured[1])},
        "seed_model": {"ttft": row.model[0], "full_hit": row.model[1]},
        "serq_ref": figures,
        "difference": compare(row, figures),
        "pyserq": run_on_pyserq(row),
    }
    return entry, wall, cpu


#: The sensitivity of each row to the per-step constant: c_it from 3.80 to
#: 4.20 ms by 0.02 ms (4 ms +-5 %), on pyserq (which gives serq-ref's figures
#: to a few parts in a million, and runs a row in 0.3 s).
SENSITIVITY_C_IT = tuple(round(0.0038 + 0.00002 * i, 5) for i in range(21))


def sensitivity(row: Row) -> dict:
    runs = [run_on_pyserq(row, (("c_it", c_it),)) for c_it in SENSITIVITY_C_IT]
    ttft, full_hit = [r["ttft"] for r in runs], [r["full_hit"] for r in runs]
    return {
        "c_it": list(SENSITIVITY_C_IT),
        "ttft": ttft,
        "full_hit": full_hit,
        "ttft_range": [min(ttft), max(ttft)],
        "full_hit_range": [min(full_hit), max(full_hit)],
        "seed_model_inside": [min(ttft) <= row.model[0] <= max(ttft), min(full_hit) <= row.model[1] <= max(full_hit)],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Section 8's table: run rows of examples/replay/vllm_replay.sq")
    parser.add_argument("--row", action="append", choices=[row.name for row in ROWS],
                        help="a row (repeatable; default: every row)")
    parser.add_argument("--record", action="store_true", help="run every row and rewrite docs/data/section8.json")
    args = parser.parse_args(argv)
    rows = ROWS if args.record or not args.row else [BY_NAME[name] for name in args.row]
    entries = []
    for row in rows:
        entry, wall, cpu = record_row(row)
        if args.record:
            entry["sensitivity"] = sensitivity(row)
        entries.append(entry)
        f, d = entry["serq_ref"], entry["difference"]
        print(f"{row.name:13s} ttft {f['ttft']:.4f} s full-hit {f['full_hit']:.4f} ({f['requests']} requests, "
              f"{f['follow_ups']} follow-ups) | seed model {row.model[0]:g} / {row.model[1]:g}: "
              f"{100 * d['ttft_relative']:+.1f} %, {d['full_hit']:+.4f} | {wall:.1f} s wall, {cpu:.1f} s cpu", flush=True)
        if "sensitivity" in entry:
            t, h = entry["sensitivity"]["ttft_range"], entry["sensitivity"]["full_hit_range"]
            print(f"{'':13s} c_it 3.80-4.20 ms (pyserq): ttft {t[0]:.4f}-{t[1]:.4f} s, full-hit {h[0]:.4f}-{h[1]:.4f}",
                  flush=True)
    if args.record:
        record = {
            "what": "seed 002 §8: examples/replay/vllm_replay.sq on the full trace (333 sessions) with the A100 cost "
                    "model and c0 = 40 ms, serq-ref beside the seed's measured and model columns",
            "commit": head_commit(),
            "program": "examples/replay/vllm_replay.sq",
            "horizon": HORIZON,
            "pinned": "the same program with pool reqs's `admit via engine` removed from its IR "
                      "(tests/test_section8.py without_admit_via)",
            "tolerance": {"ttft_relative": TTFT_TOLERANCE, "full_hit": FULL_HIT_TOLERANCE},
            "collapse": {"ttft_above": COLLAPSE_TTFT, "full_hit_below": COLLAPSE_FULL_HIT},
            "sensitivity": "each row on pyserq (the same IR) with c_it from 3.80 to 4.20 ms by 0.02 ms",
            "rows": entries,
        }
        RECORD.parent.mkdir(parents=True, exist_ok=True)
        RECORD.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
        print(f"wrote {RECORD.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
