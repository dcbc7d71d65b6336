"""examples/lib/vllm.sq used directly with a CPU tier (--set offload_chunks=N) or a sliding window with
prefix caching (--set sliding_window=W): the library's KV pool says `share prefixes when (offload_chunks > 0
|| (sliding_window > 0 && prefix_caching == 1));`, so a user gets the program the oracle harness checks
(oracle/scenario.py writes nothing more for these two) and the defaults mean what they meant (no sharing).

The program is examples/guide/vllm_poisson.sq (the library and a Poisson workload) on a small KV cache, a
few simulated seconds: enough for preemptions whose resumption hits the request's own prefix in every group
(the run that stopped with a RunError before the pool shared), and for loads from the CPU tier (offload/park;
a located link error before)."""

from __future__ import annotations

import dataclasses
import json

import pytest

from semantics.cli import main
from semantics.compiler import compile_file
from semantics.errors import RunError
from semantics.fast import engine

PROGRAM = "examples/guide/vllm_poisson.sq"
#: A small KV cache under a heavy load: preemptions within 4 s.
SMALL = {"blocks": 60, "rate": 8, "mean_prompt": 300, "mean_out": 100}
RUN = ("--horizon", "4", "--warmup", "0")


def cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def sets(**extra: float) -> list[str]:
    return [a for k, v in {**SMALL, **extra}.items() for a in ("--set", f"{k}={v:g}")]


def coverage(capsys, **extra: float) -> dict[str, int]:
    code, out, err = cli(capsys, "trace", PROGRAM, *sets(**extra), *RUN, "--coverage")
    assert code == 0 and err == "", err
    counts = {}
    for line in out.splitlines():
        n, _, name = line.strip().partition("  ")
        if name and n.replace(",", "").isdigit():
            counts[name.strip()] = int(n.replace(",", ""))
    return counts


def kv_pool(**values: float):
    program, _ = compile_file(PROGRAM, sets={**SMALL, **values})
    return program, next(p for p in program.pools if p.name == "kv")


@pytest.mark.parametrize("values, shares", [
    ({}, False),                                                # the defaults: the seed's pool
    ({"prefix_caching": 0}, False),
    ({"sliding_window": 256}, True),                            # a window with prefix caching (the default)
    ({"sliding_window": 256, "full_attention": 0}, True),
    ({"sliding_window": 256, "prefix_caching": 0}, False),      # nothing is looked up
    ({"offload_chunks": 200}, True),                            # the tier's keys are the blocks' content
])
def test_the_pool_shares_only_when_the_settings_need_it(values, shares):
    _, kv = kv_pool(**values)
    assert kv.share_prefixes is shares


def test_sliding_window_runs_directly_and_resumptions_hit_their_own_prefix(capsys):
    code, out, err = cli(capsys, "run", PROGRAM, *sets(sliding_window=256), *RUN, "--json")
    assert code == 0 and err == "", err
    assert json.loads(out)["ended"] > 0
    counts = coverage(capsys, sliding_window=256)
    assert counts["pool/preempt"] > 0 and counts["pool/hit-groups"] > 0 and counts["pool/register-window"] > 0
    assert counts["pool/slide-shared"] > 0 and counts["pool/slide"] == 0
    # the same program without the sharing stops at a resumption that would hit its own prefix (it is
    # modelled only in a sharing pool): the run above reached one
    program, kv = kv_pool(sliding_window=256)
    unshared = dataclasses.replace(program, pools=tuple(dataclasses.replace(p, share_prefixes=False)
                                                        for p in program.pools))
    with pytest.raises(RunError, match="is modelled only in a pool that shares prefixes"):
        engine.run(dataclasses.replace(unshared, horizon=4.0, warmup=0.0))


def test_offload_runs_directly_and_loads_from_the_tier(capsys):
    code, out, err = cli(capsys, "run", PROGRAM, *sets(offload_chunks=200), *RUN, "--json")
    assert code == 0 and err == "", err
    assert json.loads(out)["ended"] > 0
    counts = coverage(capsys, offload_chunks=200)
    assert counts["offload/store"] > 0 and counts["offload/land"] > 0
    assert counts["offload/park"] > 0  # an admission parked on a load from the tier
    assert counts["pool/hit"] > 0 and counts["pool/preempt"] > 0
