"""lib/vllm.sq's constants for an engine, as the oracle's programs set them (``--set`` values): on their own,
so that the replay (oracle/replay.py) takes them without importing the scenario harness (oracle/scenario.py,
which re-exports them, and its AST editing, which imports the parser)."""

from __future__ import annotations


def step_clock_sets() -> dict[str, float]:
    """lib/vllm.sq's cost on the step clock: 1 per iteration."""
    return {"c_it": 1.0, "d_decoder": 0.0, "e_context": 0.0, "a_prefill": 0.0, "b_attention": 0.0}


def engine_sets(budget: float, max_seqs: float, block_size: float, usable_blocks: float, chunk: float = 0.0,
                prefix_caching: bool = False, asynchronous: bool = False) -> dict[str, float]:
    """lib/vllm.sq's constants for an engine, on the step clock; its mode
    always set: ``asynchronous`` (vLLM 0.33.0's default, lib/vllm.sq's) or
    the synchronous engine, which the oracle harness answers a case in unless
    the case says ``"async": true`` (is_async)."""
    return {"bs": float(block_size), "blocks": float(usable_blocks), "token_budget": float(budget),
            "max_seqs": float(max_seqs), "chunk_cap": float(chunk), "prefix_caching": 1.0 if prefix_caching else 0.0,
            "async_scheduling": 1.0 if asynchronous else 0.0, **step_clock_sets()}
