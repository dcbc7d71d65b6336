"""The multi-turn replay with a system prompt every session shares (a replay
job's ``shared_head``; docs/design/shared-prefixes.md), serq-ref against the
real vLLM 0.33.0 scheduler's recorded rows: the oracle's cache trace with
heads of 8 and 40 tokens (tests/data/shared_prefix/cache_trace_head*.out.csv,
answered by `serq-ref oracle replay ... --shared-head N --real`), in the
default suite; the full trace (333 sessions, 3 321 requests) with a head of
1 000 tokens at the eleven spacings (oracle/data/replay/shared-head-*), every
request's send, first-token and finish step and cached tokens, in the
campaign."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest

from oracle.replay import COLUMNS, replay
from shared_paths import SHARED

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data" / "shared_prefix"
REPLAYS = ROOT / "oracle" / "data" / "replay"
SPACINGS = (4, 8, 12, 16, 20, 22, 23, 24, 28, 32, 40)


def rows_csv(rows) -> str:
    return ",".join(COLUMNS) + "\n" + "".join(r.csv() + "\n" for r in rows)


@pytest.mark.parametrize("head", [8, 40])
def test_the_cache_trace_with_a_shared_head_is_vllms(head):
    rows = replay(str(SHARED / "oracle" / "prefix_cache" / "cache_trace.csv"), 3, 64, 4, 20, shared_head=head)
    assert rows_csv(rows) == (DATA / f"cache_trace_head{head}.out.csv").read_text()
    # a head of 40 tokens is two full blocks of 16: sessions 1 and 2 hit them at their first turn (a head of 8
    # fills no block, and without a head a first turn hits nothing)
    first = {r.session: r.cached for r in rows if r.turn == 1}
    assert first == ({0: 0, 1: 32, 2: 32} if head == 40 else {0: 0, 1: 0, 2: 0})


def test_a_shared_head_below_one_token_is_refused():
    from semantics.errors import UsageError

    with pytest.raises(UsageError):
        replay(str(SHARED / "oracle" / "prefix_cache" / "cache_trace.csv"), 3, 64, 4, 20, shared_head=0.5)


@pytest.mark.campaign
@pytest.mark.parametrize("spacing", SPACINGS)
def test_the_full_trace_with_a_shared_head_agrees_with_vllm(spacing):
    rows = replay(str(SHARED / "traces" / "short_base.csv"), spacing, 512, 64, 8010, shared_head=1000)
    recorded = gzip.decompress((REPLAYS / f"shared-head-short_base-s{spacing:02d}.csv.gz").read_bytes()).decode()
    ours = rows_csv(rows).splitlines()
    theirs = recorded.splitlines()
    assert len(ours) == len(theirs) == 3322
    differing = [(a, b) for a, b in zip(ours, theirs) if a != b]
    assert differing == [], f"{len(differing)} of 3321 requests differ; the first: {differing[0]}"
