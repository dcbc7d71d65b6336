"""A scenario's CPU offloading (issue 20 section 3, docs/design/cpu-offloading.md):
the ``offload`` field checked with located errors, lib/vllm.sq's settings of the
tier that the harness gives the scenario's program (``offload_sets``), what the
model leaves out refused, located (``refuse_unmodelled``), and what pyserq says of it.

``"offload": {"cpu_blocks": N, "load_delay": L, "store_delay": S}``: vLLM
0.33.0's native CPU offloading (``kv_offloading_size``, its
OffloadingConnector, its CPU manager and LRU policy) over a CPU tier of N
chunks of one GPU block each (N >= 1); a load started at step s is reported
done at step s + L (L >= 0, default 0), a store made at step s at step s + S
(S >= 1, default 1: the worker submits a step's stores at the start of the
next step). Prefix caching on (the tier's keys are the prefix cache's block
hashes). Not with ``kv_groups``, ``remote`` or ``spec_tokens``: the driver
builds one full-attention group and one connector, and leaves drafts out.
"""

from __future__ import annotations

import json
from typing import Callable

from semantics.errors import ProgramError, Span

#: The fields of ``offload``: (name, least value, default).
FIELDS = (("cpu_blocks", 1, None), ("load_delay", 0, 0), ("store_delay", 1, 1))
#: Scenario fields the driver does not combine with ``offload``, and why.
NOT_WITH = {
    "kv_groups": "the driver offloads one full-attention group",
    "spec_tokens": "the driver leaves speculative decoding out of offloading",
}


def has_offload(data: object) -> bool:
    return isinstance(data, dict) and "offload" in data


def check_offload(data: dict, at: Callable[..., Span]) -> None:
    """Nothing if the scenario's ``offload`` is an object of the fields
    FIELDS (``cpu_blocks`` required, each a natural number at least its
    least value) on a scenario with prefix caching and none of NOT_WITH nor
    ``remote``; else a located ProgramError."""
    spec = data["offload"]
    names = ", ".join(name for name, _, _ in FIELDS)
    if not isinstance(spec, dict):
        raise ProgramError(f"`offload` is an object {{{names}}}, e.g. {{\"cpu_blocks\": 64, \"load_delay\": 2}}",
                           at("offload"))
    for key in spec:
        if key not in [name for name, _, _ in FIELDS]:
            raise ProgramError(f"`{key}` is not a field of `offload` (fields: {names})", at("offload", key))
    if "cpu_blocks" not in spec:
        raise ProgramError("`offload` has no `cpu_blocks`: the CPU tier's size in blocks", at("offload"))
    for name, least, _ in FIELDS:
        if name not in spec:
            continue
        value = spec[name]
        if isinstance(value, bool) or not isinstance(value, int) or value < least:
            raise ProgramError(f"`offload.{name}` is {json.dumps(value)}, not a natural number at least {least}"
                               + (": vLLM refuses a CPU tier of no bytes (vllm/v1/kv_offload/cpu/spec.py:100-104)"
                                  if name == "cpu_blocks" else "")
                               + (": the worker submits a step's stores at the start of the next step "
                                  "(vllm/distributed/kv_transfer/kv_connector/v1/offloading/worker.py:272-284)"
                                  if name == "store_delay" else ""), at("offload", name))
    if not data.get("prefix_caching"):
        raise ProgramError("a scenario with `offload` has `\"prefix_caching\": true`: the CPU tier's keys are the "
                           "prefix cache's block hashes", at("offload"))
    for key, why in NOT_WITH.items():
        if data.get(key):
            raise ProgramError(f"`offload` with `{key}`: {why}", at(key))
    for k, r in enumerate(data.get("requests") or ()):
        if isinstance(r, dict) and "remote" in r:
            raise ProgramError("`offload` with `remote`: the driver builds one connector, vLLM's offloading one",
                               at("requests", k, "remote"))


def offload_sets(data: dict) -> dict[str, float]:
    """lib/vllm.sq's settings of a scenario's CPU tier (docs/design/cpu-offloading.md, section 6): its chunks
    and delays; none without ``offload``."""
    if not has_offload(data):
        return {}
    spec = data["offload"]
    # the offloading connector's role is kv_both, a consumer: under asynchronous scheduling vLLM defers block
    # frees as for the KV connector (scheduler.py:189-195; lib/vllm.sq's kv_connector: `defer free`)
    return {"kv_connector": 1.0, "offload_chunks": float(spec["cpu_blocks"]),
            "offload_load_delay": float(spec.get("load_delay", 0)),
            "offload_store_delay": float(spec.get("store_delay", 1))}


def refuse_unmodelled(data: dict, at: Callable[..., Span]) -> None:
    """The located refusal of what the model of the tier leaves out (docs/design/cpu-offloading.md, section 7):
    the limits and priorities the corpus never combines with the tier. (A one-token prompt in blocks of one
    token, which vLLM 0.33.0 loads from the tier for ever, is modelled: offload/reload, section 1.7.)"""
    if not has_offload(data):
        return
    for key in ("policy", "max_model_len", "watermark"):
        if key in data:
            raise ProgramError(f"serq-ref does not model CPU offloading with `{key}` (docs/design/cpu-offloading.md, "
                               f"section 7): the recorded corpus never combines them", at(key))


def refuse_offload(data: dict, at: Callable[..., Span]) -> None:
    """The one-request program's located refusal of a scenario with CPU offloading: that program has no CPU
    tier (and no prefix sharing, which the tier's keys need); the harness's program (lib/vllm.sq's
    ``offload_chunks``) answers it."""
    if has_offload(data):
        raise ProgramError("the one-request program does not model CPU offloading (docs/design/cpu-offloading.md): "
                           "the harness's program, lib/vllm.sq with its CPU tier, does", at("offload"))


def beyond_the_seed(data: object) -> str | None:
    """What pyserq (seed 002's model only) says it cannot answer, or None."""
    if has_offload(data):
        return "CPU offloading (offload): seed 002's vLLM program has no CPU tier"
    return None
