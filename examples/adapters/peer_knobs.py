"""What a peer of the field cannot express, in the words both adapters share
(examples/adapters/dynamo_adapter.py, vidur_adapter.py; docs/field.md).

Standard library only: each adapter runs as a script under its own peer's
Python (Dynamo's venv, Vidur's venv), which has nothing of serq-ref, and
imports this module from the adapter's own directory.

A scenario field the adapters map, and the knobs neither peer has: a
serve-by key, a priority policy, asynchronous scheduling, a long-prefill
token threshold that binds, max_model_len refusals and a watermark, and the
multi-turn replays' closed loop. Each peer says in its own words why it
lacks the policies, the threshold and the replays (`Lacks`); what else
a peer lacks (the mocker's block of one token, Vidur's prefix caching) its
adapter checks itself.
"""
from __future__ import annotations

from typing import NamedTuple

#: the scenario fields (oracle/scenario.py's) an adapter reads or refuses
KNOWN = frozenset({"kind", "budget", "max_seqs", "block_size", "num_blocks", "chunk", "prefix_caching", "requests",
                   "serve", "policy", "async", "max_model_len", "watermark"})


class Lacks(NamedTuple):
    """A peer's reason for each knob it lacks, after the knob's name."""
    serve: str       # why a serve-by key (vLLM's priority path) cannot be expressed
    priority: str    # why a priority policy cannot
    schedule: str    # why asynchronous scheduling (schedule ahead) cannot
    threshold: str   # the peer's part that has no long_prefill_token_threshold
    replay: str      # why a multi-turn replay (campaign/replays.jsonl) cannot


def unmapped(scenario: dict, lacks: Lacks) -> str | None:
    """Why the peer cannot express ``scenario``'s fields or its serving
    policy (a multi-turn replay, unknown fields, a serve-by key,
    priorities, schedule ahead); None: it can, so far."""
    if scenario.get("kind") == "replay":
        return ("a multi-turn replay (a session's turn is sent when its previous turn has finished and its "
                "think time passed, its prompt the session so far): " + lacks.replay)
    unknown = sorted(set(scenario) - KNOWN)
    if unknown:
        return "the scenario has fields the adapter does not map: " + ", ".join(unknown)
    if "serve" in scenario:
        return "a serve-by key (vLLM's priority path): " + lacks.serve
    if scenario.get("policy", "fcfs") != "fcfs" or any("priority" in r for r in scenario["requests"]):
        return "a priority policy: " + lacks.priority
    if scenario.get("async"):
        return "asynchronous scheduling (schedule ahead): " + lacks.schedule
    return None


def bounded(scenario: dict, lacks: Lacks) -> str | None:
    """Why the peer cannot express ``scenario``'s bounds: a long-prefill
    token threshold below some request's prompt + output (vLLM caps every
    prefill chunk at it, so it can bind), max_model_len refusals or a
    watermark; None: it can."""
    chunk = scenario.get("chunk") or 0
    if chunk and any(chunk < r["prompt"] + r["out"] for r in scenario["requests"]):
        return f"a long-prefill token threshold ({chunk}) that can bind: {lacks.threshold} no long_prefill_token_threshold"
    if scenario.get("max_model_len") is not None or scenario.get("watermark"):
        return "max_model_len refusals and a watermark: the adapter maps neither"
    return None
