#!/usr/bin/env python3
"""The real vLLM 0.33.0 scheduler as an oracle: a standalone program.

Run by the vLLM environment's python (oracle/real/setup-vllm.sh builds it),
never imported by serq-ref: it imports vllm, serq-ref does not. It drives
vLLM's own ``Scheduler`` and ``KVCacheManager`` with a fake model runner (no
model, no device), as ../shared/oracle/VLLM-DRIVER.md describes, and answers
jobs given as JSON:

    python driver.py JOB.json            one job (a JSON object), one answer
    python driver.py JOBS.jsonl          one job per line, one answer per line
    python driver.py - < JOBS.jsonl      the same from standard input
    python driver.py --csv REPLAY.json   a replay's answer as CSV text

A job is one of
- a **scenario** (``{"kind": "scenario", ...}``, or any object with
  ``requests``): the format of ../shared/oracle/vllm/NAME.json (budget,
  max_seqs, block_size, num_blocks, chunk, prefix_caching, requests of
  prompt/out/arrive), optionally ``serve`` (a serve-by key in serQ syntax:
  admission, -admission, decoding ? 1 : 0, ...) or ``serve_by`` (the same
  keys as IR expressions, as NAME.target.json has them), ``max_steps``;
  ``policy`` ("fcfs", the default, or "priority": vLLM's stock priority
  policy, each request's ``priority`` an integer, default 0, smaller first),
  ``max_model_len`` (default 8192, see Limits) and ``watermark`` (vLLM's
  scheduler setting, default 0), ``spec_tokens`` (speculative decoding
  with that many draft tokens, 1-8; each request's ``accept``, a list of
  natural numbers, default [0], is its acceptance pattern: see Speculative
  decoding below), ``kv_groups`` (the model's KV cache groups: see KV
  cache groups below); answered as NAME.out.json is (first, done,
  preemptions, steps, config), plus ``status`` ("finished", or why it
  stopped), ``unfinished``, and ``refused`` ({id: why}, only when some
  request was refused; ``vllm_messages`` then has vLLM's own words);
- a **replay** (``{"kind": "replay", ...}``): a trace (``trace``: CSV text
  with the columns session,turn,new,out,think,forced, or ``rows``: a list of
  such objects), ``spacing``, ``budget``, ``max_seqs``, ``blocks`` (usable
  blocks; the scheduler gets one more, the null block), ``block_size``
  (default 16), ``max_model_len`` (default 32768), ``max_steps``,
  ``shared_head`` (default 0; N: a system prompt of N tokens every
  session's range begins with, docs/oracle.md); replayed
  under the replay protocol of ../shared/oracle/README.md and answered with
  ``rows`` (session, turn, sent, first, done, prompt, cached, out: the
  columns of cache_trace.out.csv), ``csv`` (the same as text), ``status``,
  ``steps``, ``unfinished``.

Either kind also takes
- ``step_trace``: true adds ``step_trace`` to the answer, one
  ``[time, {request id: tokens scheduled}, [preempted ids]]`` per
  ``schedule()`` call that scheduled a token or preempted (time: the step
  number of a scenario; the clock before the step of a replay; request ids:
  a scenario's position, a replay's ``session:turn index``), for finding the
  first step at which another engine differs (``serq-ref oracle campaign``);
- ``cache_computed_only`` (default false; an experiment, not vLLM's rule): a
  preempted request's blocks stay cached only as far as it had computed
  them. vLLM 0.33.0 caches a request's full blocks when it allocates them
  for the tokens a pass schedules (vllm/v1/core/kv_cache_manager.py:621-625),
  and on its priority path a victim that the same pass had already
  scheduled is withdrawn (vllm/v1/core/sched/scheduler.py:950-956) with
  those blocks still cached, though their tokens are never computed; serQ
  caches what the hold computed (docs/divergences.md, D11).

Conventions (the recorded answers' own; oracle/README.md in serq-ref):
- scenario: request i's prompt token k is (i*7919 + k) % 50000 + 1, so no
  request hits another's prefix; a request with ``arrive: k`` is added after
  step k; steps count from 1, and ``steps`` is the last step run (vLLM runs
  one empty step after the last finish, to flush the finished ids);
- replay: session i's prompt token j is (i+1)*100003 + j, turn k's prompt is
  the first ``new`` ids of that range; a forced turn (forced = 1) puts a
  nonce at the head of the range (token 0 becomes 900000000 + i*10000 + f,
  f the session's count of forced turns so far), and the later turns of the
  session keep that head, so a forced turn matches nothing cached and the
  turn after it extends it;
- the fake model runner samples token id 0 (in no prompt) for every
  scheduled request whose computed tokens reach its token count after
  schedule(), and nothing for one mid-prefill or mid-recompute;
- scenario priorities: a request's ``arrival_time`` is its place in the
  order requests are added (1, 2, ...: by arrive, then position), so that
  vLLM's (priority, arrival_time) order never falls to the wall clock.

Limits (a scenario's; docs/design/priorities-and-limits.md in serq-ref):
- a scenario that gives ``max_model_len`` is a deployment vLLM must be able
  to start: if its KV cache cannot hold one request of that length (vLLM's
  own check_enough_kv_cache_memory, vllm/v1/core/kv_cache_planning.py:151-183)
  every request is refused, with why, and nothing is scheduled;
- a prompt at or over ``max_model_len`` is refused as vLLM's input processor
  refuses it (vllm/v1/engine/input_processor.py:557-602, called here) and
  never added; a request whose prompt + out would pass it is ended by
  check_stop at max_model_len tokens (vllm/v1/core/sched/utils.py:112-117);
- a scenario without ``max_model_len`` keeps the recorded corpora's
  convention (8192, and a KV cache usually smaller than one such request,
  which vLLM itself would refuse to start): a request that could not finish
  even alone in the cache (ceil(min(prompt + out - 1, max_model_len - 1) /
  block_size) blocks above num_blocks - 1) is refused up front instead of
  left waiting forever at the head of the queue.

Speculative decoding (docs/design/speculative-decoding.md in serq-ref): the
scheduler gets a SpeculativeConfig of the n-gram method (no lookahead
slots, no draft-slot budget); nothing proposes but the driver. Under the
synchronous engine, after each step every request of the batch that is
not mid-prefill is given K drafts (token id 1; update_draft_token_ids, as
the engine core's post_step does); under the asynchronous engine the
drafts are AsyncScheduler's placeholders. A batch that verifies d drafts of
request i, which had r output tokens still to produce before it (those of
a batch in flight counted as produced), accepts min(d, accept[r mod
len(accept)]) of them: the fake runner samples that many drafts and one
token more. Drafts of a request the schedule() took from the waiting queue
are vLLM's padding and never accepted.

KV cache groups (docs/design/sliding-window.md in serq-ref): a scenario's
``kv_groups`` is a list of one or two groups, ``{"kind": "full"}`` (a
full-attention layer) or ``{"kind": "sliding", "window": W}`` (a
sliding-window layer of W tokens): ``[{"kind": "sliding", "window": W}]`` a
sliding-window model alone, ``[{"kind": "full"}, {"kind": "sliding",
"window": W}]`` a hybrid one. Each group is one layer of the fake model,
all of one block size, over one block pool of ``num_blocks`` blocks (the
uniform-page layout vLLM plans for such a model: one block of the pool is
one block of one group); the KV cache config's retention interval is the
cache config's (0, vLLM's default: vllm/config/cache.py:275), as the
engine core's planner sets it (vllm/v1/core/kv_cache_planning.py:738-741);
a synchronous scenario's scheduler config says ``async_scheduling`` false
(as the synchronous engine's has it), so that vLLM's max_in_flight_tokens is
one budget, not two (vllm/config/vllm.py:587-609).
Without ``kv_groups`` the model is one full-attention group, as always.
Under the recorded convention a request is refused up front when, alone in
the cache, its blocks in every group could exceed the usable blocks: per
full group ceil(tokens / block_size), per sliding group the least of that
and vLLM's own admission cap (SlidingWindowSpec.max_admission_blocks_per_request,
vllm/v1/kv_cache_interface.py:918-944), summed.
The KV connector (docs/design/kv-connector.md in serq-ref): a scenario
some of whose requests give ``remote`` (the prompt tokens a prefill
instance computed, at most the prompt) is a decode instance: the scheduler
gets oracle/real/remote_kv.py's connector (``kv_role`` kv_consumer), which
offers a request's remote tokens past its local hit, loaded asynchronously,
once; the transfer started by step s's schedule() is reported done
(``finished_recving``) in the output of step s + the request's
``kv_delay`` (default 0). The answer adds ``transfers``: request id to
[step started, step reported done]. A scenario waiting only for a transfer
is not stalled.
CPU offloading (docs/design/cpu-offloading.md in serq-ref): a scenario
with ``offload`` ({cpu_blocks, load_delay, store_delay}) gets vLLM's own
OffloadingConnector (``kv_offloading_size``, backend native: its CPU
manager and LRU policy over ``cpu_blocks`` chunks of one block); the
driver plays its worker (oracle/real/offload.py): a load started at step s
is reported done at s + load_delay, a store at s + store_delay, a flushed
store at the step that flushes it. The answer adds ``offload``: the tier's
chunks as vLLM built it, each request's loads [step started, step reported
done, tokens], the chunks stored and evicted.

Nothing here copies vLLM's code; it calls vLLM's public classes.
"""

from __future__ import annotations

import argparse
import collections
import copy
import dataclasses
import heapq
import io
import json
import math
import os
import sys
import tempfile
import time

VLLM_VERSION = "0.33.0"
SAMPLED_TOKEN = 0
DEFAULT_SCENARIO_MAX_MODEL_LEN = 8192
DEFAULT_REPLAY_MAX_MODEL_LEN = 32768
DEFAULT_SCENARIO_MAX_STEPS = 100_000
DEFAULT_REPLAY_MAX_STEPS = 2_000_000
REPLAY_COLUMNS = ("session", "turn", "sent", "first", "done", "prompt", "cached", "out")
NONCE_BASE = 900_000_000

# vLLM writes under the home directory and looks for the hub unless told
# otherwise; it must not, here.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("VLLM_PLUGINS", "")
os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")
os.environ.setdefault("VLLM_CACHE_ROOT", tempfile.mkdtemp(prefix="serq-vllm-cache-"))

import torch  # noqa: E402
import vllm  # noqa: E402
from vllm.config import (  # noqa: E402
    CacheConfig,
    DeviceConfig,
    ModelConfig,
    SchedulerConfig,
    VllmConfig,
)
from vllm.sampling_params import SamplingParams  # noqa: E402
from vllm.utils.hashing import get_hash_fn_by_name  # noqa: E402
from vllm.v1.core.kv_cache_utils import get_request_block_hasher, init_none_hash  # noqa: E402
from vllm.v1.core.sched.async_scheduler import AsyncScheduler  # noqa: E402
from vllm.v1.core.sched.scheduler import Scheduler  # noqa: E402
from vllm.v1.kv_cache_interface import (  # noqa: E402
    FullAttentionSpec,
    KVCacheConfig,
    KVCacheGroupSpec,
    SlidingWindowSpec,
)
from vllm.v1.outputs import ModelRunnerOutput  # noqa: E402
from vllm.v1.request import Request, RequestStatus  # noqa: E402
from vllm.v1.structured_output import StructuredOutputManager  # noqa: E402

HASH_FN = get_hash_fn_by_name("sha256")
init_none_hash(HASH_FN)


# ---------------------------------------------------------------------------
# Building a scheduler without a model or a device


class _Models:
    """One ModelConfig per max_model_len (building one takes ~15 s: vLLM
    inspects the architecture), from a tiny Llama config.json written here."""

    def __init__(self) -> None:
        self._dir = tempfile.mkdtemp(prefix="serq-vllm-model-")
        config = {
            "architectures": ["LlamaForCausalLM"],
            "model_type": "llama",
            "hidden_size": 64,
            "intermediate_size": 128,
            "num_attention_heads": 4,
            "num_key_value_heads": 1,
            "num_hidden_layers": 1,
            "vocab_size": 1024,
            "max_position_embeddings": 65536,
            "torch_dtype": "float16",
        }
        with open(os.path.join(self._dir, "config.json"), "w") as f:
            json.dump(config, f)
        self._base: ModelConfig | None = None
        self._by_len: dict[int, ModelConfig] = {}

    def get(self, max_model_len: int) -> ModelConfig:
        if max_model_len not in self._by_len:
            if self._base is None:
                self._base = ModelConfig(
                    model=self._dir,
                    skip_tokenizer_init=True,
                    dtype="float16",
                    max_model_len=max_model_len,
                )
                model = self._base
            else:
                # The same model with another context length: the field is
                # all the scheduler reads of it.
                model = copy.copy(self._base)
                model.max_model_len = max_model_len
            self._by_len[max_model_len] = model
        return self._by_len[max_model_len]


MODELS = _Models()


def make_scheduler(
    *,
    budget: int,
    max_seqs: int,
    block_size: int,
    num_blocks: int,
    chunk: int,
    prefix_caching: bool,
    max_model_len: int,
    policy: str = "fcfs",
    cls: type | None = None,
    async_scheduling: bool = False,
    watermark: float = 0.0,
    spec_tokens: int = 0,
    spec_method: str = "ngram",
    kv_groups: list | None = None,
    remote_kv: bool = False,
    offload: dict | None = None,
):
    """A real vLLM Scheduler with its KVCacheManager over ``num_blocks`` blocks
    (one of which is vLLM's null block). ``async_scheduling``: the scheduler
    class is vLLM's AsyncScheduler (what SchedulerConfig.get_scheduler_cls
    picks when async_scheduling is set, vllm/config/scheduler.py:231-236)
    under ``cls``'s observation; the caller then drives it with a batch
    queue (``drive_async``). ``spec_tokens`` > 0: speculative decoding with
    that many draft tokens per request and step (``speculative_config``), the
    drafter ``spec_method`` (SPEC_METHODS: its lookahead slots and draft-slot
    budget).
    ``kv_groups``: the scenario's KV cache groups (``kv_cache_groups_of``);
    None, one full-attention group.
    ``remote_kv``: the decode side of P/D with the oracle's KV connector
    (oracle/real/remote_kv.py, ``kv_transfer_config``).
    ``offload``: CPU offloading (the scenario's ``offload``): vLLM's own
    OffloadingConnector over a CPU tier of ``cpu_blocks`` chunks
    (oracle/real/offload.py, ``kv_offloading_size``)."""
    cls = ObservedScheduler if cls is None else cls
    model = MODELS.get(max_model_len)
    extra = {}
    if async_scheduling:
        extra["async_scheduling"] = True
        cls = async_class(cls)
    elif kv_groups is not None:
        # The synchronous engine as a deployment that turned asynchronous
        # scheduling off has it: one batch in flight, so the sliding-window
        # admission cap counts one budget (max_in_flight_tokens,
        # vllm/config/vllm.py:587-609). Left unset, it would resolve to True.
        extra["async_scheduling"] = False
    sched_cfg = SchedulerConfig(
        max_model_len=max_model_len,
        is_encoder_decoder=False,
        max_num_batched_tokens=budget,
        max_num_seqs=max_seqs,
        enable_chunked_prefill=True,
        long_prefill_token_threshold=chunk,
        policy=policy,
        **extra,
        watermark=watermark,
    )
    cache_cfg = CacheConfig(block_size=block_size, enable_prefix_caching=prefix_caching)
    if offload is not None:  # vLLM picks OffloadingConnector itself (vllm/config/vllm.py:1150-1185)
        cache_cfg.kv_offloading_size = offload_module().offloading_size_gib(
            int(offload["cpu_blocks"]), block_size, FullAttentionSpec(
                block_size=block_size, num_kv_heads=1, head_size=1, dtype=torch.float32).page_size_bytes)
    vllm_cfg = VllmConfig(
        model_config=model,
        scheduler_config=sched_cfg,
        cache_config=cache_cfg,
        device_config=DeviceConfig(device="cpu"),
        **({"speculative_config": speculative_config_of(model, spec_tokens, spec_method)} if spec_tokens else {}),
        **({"kv_transfer_config": remote_kv_module().transfer_config()} if remote_kv else {}),
    )
    cache_cfg.num_gpu_blocks = num_blocks
    if kv_groups is None:
        kv_cfg = KVCacheConfig(
            num_blocks=num_blocks,
            kv_cache_tensors=[],
            kv_cache_groups=[
                KVCacheGroupSpec(
                    ["layer.0"],
                    FullAttentionSpec(
                        block_size=block_size, num_kv_heads=1, head_size=1, dtype=torch.float32
                    ),
                )
            ],
        )
    else:
        kv_cfg = KVCacheConfig(
            num_blocks=num_blocks,
            kv_cache_tensors=[],
            kv_cache_groups=kv_cache_groups_of(kv_groups, block_size),
            prefix_cache_retention_interval=cache_cfg.prefix_cache_retention_interval,
        )
    return cls(
        vllm_config=vllm_cfg,
        kv_cache_config=kv_cfg,
        structured_output_manager=StructuredOutputManager(vllm_cfg),
        block_size=block_size,
        hash_block_size=block_size,
        log_stats=True,
    )


def kv_cache_groups_of(kv_groups: list, block_size: int) -> list:
    """vLLM's KV cache groups of a scenario's ``kv_groups``: group i is the
    fake model's layer ``layer.i``, a FullAttentionSpec or a
    SlidingWindowSpec of the scenario's block size (one KV head of size 1:
    every group's page the same size, as one block pool needs)."""
    groups = []
    for i, group in enumerate(kv_groups):
        common = dict(block_size=block_size, num_kv_heads=1, head_size=1, dtype=torch.float32)
        if group["kind"] == "full":
            spec = FullAttentionSpec(**common)
        elif group["kind"] == "sliding":
            spec = SlidingWindowSpec(**common, sliding_window=int(group["window"]))
        else:
            raise ValueError(f"kv_groups[{i}]: kind {group['kind']!r} is not full or sliding")
        groups.append(KVCacheGroupSpec([f"layer.{i}"], spec))
    return groups


def make_request(request_id: str, token_ids: list[int], out: int, block_size: int,
                 priority: int = 0, arrival_time: float | None = None, remote: int | None = None) -> Request:
    """A request as the engine core builds one: its block hasher, max_tokens
    = out, EOS ignored (the scheduler learns the length from the cap); its
    priority and arrival time when given; ``remote``: the prompt tokens a
    prefill instance computed for it (its kv_transfer_params, read by the
    oracle's connector)."""
    extra = remote_kv_module().transfer_params(remote) if remote is not None else None
    return Request(
        request_id,
        token_ids,
        SamplingParams(max_tokens=out, ignore_eos=True, extra_args=extra),
        pooling_params=None,
        block_hasher=get_request_block_hasher(block_size, HASH_FN),
        arrival_time=arrival_time,
        priority=priority,
    )


# ---------------------------------------------------------------------------
# Refusals: what vLLM refuses before it schedules anything


def startup_refusal(scheduler) -> tuple[str, str] | None:
    """Why vLLM would refuse to start this KV cache, or None: its own check
    that the cache holds one request of max_model_len
    (vllm/v1/core/kv_cache_planning.py:151-183), given the memory of
    ``num_blocks`` blocks (the null block included, as vLLM plans), with
    vLLM's own message."""
    from vllm.v1.core.kv_cache_planning import check_enough_kv_cache_memory

    kv_cfg = scheduler.kv_cache_config
    spec = kv_cfg.kv_cache_groups[0].kv_cache_spec
    # one layer per group (kv_cache_groups_of); a pool block is one group's page
    layers = {group.layer_names[0]: group.kv_cache_spec for group in kv_cfg.kv_cache_groups}
    config = copy.copy(scheduler.vllm_config)
    config.cache_config = copy.copy(config.cache_config)
    if config.cache_config.kv_cache_layout is None:
        # The engine core resolves the layout before this check; any layout
        # gives one full-attention group's block the same size.
        config.cache_config.kv_cache_layout = "NHD"
    try:
        check_enough_kv_cache_memory(config, layers, kv_cfg.num_blocks * spec.page_size_bytes)
    except ValueError as error:
        length = scheduler.max_model_len
        usable = kv_cfg.num_blocks - 1
        return (f"configuration: the KV cache of {usable} usable blocks of {scheduler.block_size} tokens "
                f"cannot hold one request of max_model_len {length} "
                f"({-(-length // scheduler.block_size)} blocks)", str(error))
    return None


def prompt_refusal(scheduler, prompt: int) -> tuple[str, str] | None:
    """Why vLLM's input processor refuses a prompt of ``prompt`` tokens (and
    its message), or None: its own length check (vllm/v1/engine/input_processor.py:557-602),
    called on the scheduler's model configuration."""
    from vllm.v1.engine.input_processor import InputProcessor

    holder = type("PromptCheck", (), {})()
    holder.skip_prompt_length_check = False
    holder.model_config = scheduler.vllm_config.model_config
    holder.supports_mm_inputs = False
    holder.mm_encoder_cache_size = 0
    try:
        InputProcessor._validate_prompt_len(holder, prompt, "decoder")
    except Exception as error:  # VLLMValidationError
        return f"prompt: {prompt} tokens, not below max_model_len {scheduler.max_model_len}", str(error)
    return None


def fit_refusal(scheduler, prompt: int, out: int) -> tuple[str, None] | None:
    """Under the recorded corpora's convention (no max_model_len given): why
    a request could never finish alone in the cache (vLLM has no message:
    it would have refused to start), or None."""
    tokens = min(prompt + out - 1, scheduler.max_model_len - 1)
    need = -(-tokens // scheduler.block_size)
    usable = scheduler.kv_cache_config.num_blocks - 1
    groups = scheduler.kv_cache_config.kv_cache_groups
    if len(groups) > 1 or isinstance(groups[0].kv_cache_spec, SlidingWindowSpec):
        need = sum(group_need(scheduler, group.kv_cache_spec, need) for group in groups)
        if need > usable:
            return (f"never fits: {tokens} tokens need {need} blocks of {scheduler.block_size} in its "
                    f"{len(groups)} KV cache groups, the KV cache has {usable} usable"), None
        return None
    if need > usable:
        return (f"never fits: {tokens} tokens need {need} blocks of {scheduler.block_size}, "
                f"the KV cache has {usable} usable"), None
    return None


def group_need(scheduler, spec, blocks: int) -> int:
    """A request's most blocks in one KV cache group, ``blocks`` being its
    tokens' blocks: all of them in a full-attention group; in a
    sliding-window group at most vLLM's admission cap
    (max_admission_blocks_per_request with the scheduler's
    max_in_flight_tokens, vllm/v1/core/single_type_kv_cache_manager.py:2608-2640)."""
    if isinstance(spec, SlidingWindowSpec):
        cap = spec.max_admission_blocks_per_request(
            max_in_flight_tokens=scheduler.vllm_config.max_in_flight_tokens,
            max_model_len=scheduler.max_model_len)
        return min(blocks, cap)
    return blocks


def fake_model_step(scheduler, scheduler_output):
    """One forward pass of the fake model runner: a token for every scheduled
    request that has computed all its tokens (the GPU runner's rule: a request
    mid-prefill or mid-recompute samples nothing). Returns the ids that
    sampled, and update_from_output's {client: EngineCoreOutputs}."""
    ids = list(scheduler_output.num_scheduled_tokens)
    sampled = []
    for rid in ids:
        request = scheduler.requests[rid]
        sampled.append([SAMPLED_TOKEN] if request.num_computed_tokens >= request.num_tokens else [])
    runner_output = ModelRunnerOutput(
        req_ids=ids,
        req_id_to_index={rid: index for index, rid in enumerate(ids)},
        sampled_token_ids=sampled,
    )
    engine_outputs = scheduler.update_from_output(scheduler_output, runner_output)
    sampled_ids = [rid for rid, tokens in zip(ids, sampled) if tokens]
    return sampled_ids, engine_outputs



# ---------------------------------------------------------------------------
# Speculative decoding (docs/design/speculative-decoding.md in serq-ref)

#: The token id of every draft the fake proposer proposes (in no prompt, never the sampled token).
DRAFT_TOKEN = 1
#: vLLM's placeholder draft id (a padded or not yet proposed draft).
PLACEHOLDER_DRAFT = -1


def speculative_config(model, spec_tokens: int):
    """vLLM's SpeculativeConfig with ``spec_tokens`` draft tokens and the
    n-gram method: nothing to load, no lookahead slots (num_lookahead_tokens
    0, vllm/config/vllm.py:626-652) and no draft-slot budget
    (max_num_new_slots_for_drafting 0, vllm/config/speculative.py:2058-2080).
    Its n-gram sizes are never used: the driver proposes the drafts."""
    from vllm.config import ParallelConfig, SpeculativeConfig

    return SpeculativeConfig(method="ngram", num_speculative_tokens=int(spec_tokens), prompt_lookup_max=2,
                             prompt_lookup_min=1, target_model_config=model,
                             target_parallel_config=ParallelConfig())


#: The drafters a scenario's ``spec_method`` names (docs/design/speculative-decoding.md, section 8), each
#: vLLM's SpeculativeConfig method and parallel_drafting: ``ngram`` (no lookahead slots, no draft-slot budget),
#: ``draft_model`` (K lookahead slots, vllm/config/vllm.py:646-651; one draft slot per scheduled request,
#: vllm/config/speculative.py:2094-2096) and ``parallel_draft_model`` (PARD: K lookahead slots and K draft
#: slots, speculative.py:2085-2090). The draft model is the target's own tiny configuration: the scheduler
#: reads only the method, K and the two counts.
SPEC_METHODS = {"ngram": None, "draft_model": False, "parallel_draft_model": True}


def speculative_config_of(model, spec_tokens: int, method: str = "ngram"):
    """vLLM's SpeculativeConfig for ``method`` (SPEC_METHODS) with ``spec_tokens`` draft tokens."""
    if method not in SPEC_METHODS:
        raise ValueError(f"spec_method {method!r}: one of {', '.join(SPEC_METHODS)}")
    if SPEC_METHODS[method] is None:
        return speculative_config(model, spec_tokens)
    from vllm.config import ParallelConfig, SpeculativeConfig

    return SpeculativeConfig(method="draft_model", model=model.model, num_speculative_tokens=int(spec_tokens),
                             parallel_drafting=SPEC_METHODS[method], target_model_config=model,
                             target_parallel_config=ParallelConfig())


def accepted_of(pattern: list[int], remaining: int, drafts: list[int]) -> int:
    """The drafts a batch accepts (docs/design/speculative-decoding.md,
    section 2): pattern[remaining mod len(pattern)], at most the drafts
    scheduled that are real (a run of placeholders, vLLM's padding, is never
    accepted), where ``remaining`` is the output tokens the request still had
    to produce before the batch."""
    real = 0
    for token in drafts:
        if token == PLACEHOLDER_DRAFT:
            break
        real += 1
    return min(real, int(pattern[max(remaining, 0) % len(pattern)]))


def from_waiting(scheduler_output) -> set:
    """The ids this schedule() took from the waiting queue (new or resumed):
    their drafts are padding (scheduler.py:1308-1330), never accepted."""
    ids = {r.req_id for r in scheduler_output.scheduled_new_reqs}
    ids |= set(getattr(scheduler_output.scheduled_cached_reqs, "resumed_req_ids", None) or ())
    return ids


def spec_sampled(scheduler, scheduler_output, patterns: dict, promised: dict | None = None) -> list[list[int]]:
    """The fake runner's sampled ids per scheduled request under speculative
    decoding: for one that samples, its accepted drafts then one bonus token
    (``1 + accepted_of``), for one mid-prefill nothing. Synchronous engine
    (``promised`` None): a request samples when its computed tokens reach its
    token count after schedule(); asynchronous: when it is not mid-prefill
    (is_prefill_chunk), the output tokens still to come counting those
    ``promised`` by the batch in flight (request id -> tokens)."""
    spec = scheduler_output.scheduled_spec_decode_tokens
    waiting = from_waiting(scheduler_output)
    sampled = []
    for rid in scheduler_output.num_scheduled_tokens:
        request = scheduler.requests[rid]
        samples = (not request.is_prefill_chunk) if promised is not None else \
            request.num_computed_tokens >= request.num_tokens
        if not samples:
            sampled.append([])
            continue
        drafts = [] if rid in waiting else list(spec.get(rid, ()))
        if promised is not None:  # AsyncScheduler's drafts are placeholders; the worker holds the real ones
            drafts = [DRAFT_TOKEN if t == PLACEHOLDER_DRAFT else t for t in drafts]
        remaining = request.max_tokens - request.num_output_tokens - (promised or {}).get(rid, 0)
        accepted = accepted_of(patterns[rid], remaining, drafts)
        sampled.append([DRAFT_TOKEN] * accepted + [SAMPLED_TOKEN])
    return sampled


def propose_drafts(scheduler, ids) -> None:
    """The engine core's post_step under the synchronous engine
    (vllm/v1/engine/core.py:700-706): the runner's next drafts, K of them,
    for each request of the batch (update_draft_token_ids skips finished
    ones and those mid-prefill, scheduler.py:2862-2881)."""
    from vllm.v1.outputs import DraftTokenIds

    ids = [rid for rid in ids if rid in scheduler.requests]
    if ids:
        scheduler.update_draft_token_ids(DraftTokenIds(ids, [[DRAFT_TOKEN] * scheduler.num_spec_tokens for _ in ids]))


def fake_model_step_spec(scheduler, scheduler_output, patterns: dict):
    """fake_model_step under speculative decoding (synchronous engine): the
    sampled ids of spec_sampled, the update, then the next drafts."""
    ids = list(scheduler_output.num_scheduled_tokens)
    sampled = spec_sampled(scheduler, scheduler_output, patterns)
    runner_output = ModelRunnerOutput(
        req_ids=ids,
        req_id_to_index={rid: index for index, rid in enumerate(ids)},
        sampled_token_ids=sampled,
    )
    engine_outputs = scheduler.update_from_output(scheduler_output, runner_output)
    propose_drafts(scheduler, ids)
    sampled_ids = [rid for rid, tokens in zip(ids, sampled) if tokens]
    return sampled_ids, engine_outputs


def async_class(cls: type) -> type:
    """``cls``'s observation over vLLM's AsyncScheduler (its
    _update_after_schedule adds the output placeholders,
    vllm/v1/core/sched/async_scheduler.py:24-56); everything else is
    vLLM's Scheduler as under the synchronous engine."""
    return type("Async" + cls.__name__, (cls, AsyncScheduler), {})


def fake_model_output(scheduler, scheduler_output, patterns: dict | None = None,
                      promised: dict | None = None) -> ModelRunnerOutput:
    """The fake model runner's answer to a batch under asynchronous
    scheduling, fixed when the batch is formed (the executor's future): a
    token for every scheduled request that is not mid-prefill or
    mid-recompute after this schedule() (``is_prefill_chunk`` as
    _update_after_schedule sets it counting the output placeholders,
    vllm/v1/core/sched/scheduler.py:1856-1858): the GPU runner's rule of
    fake_model_step, read before the previous batch's output is applied."""
    ids = list(scheduler_output.num_scheduled_tokens)
    if patterns is not None:  # speculative decoding: accepted drafts and the bonus token (spec_sampled)
        sampled = spec_sampled(scheduler, scheduler_output, patterns, promised)
    else:
        sampled = [[] if scheduler.requests[rid].is_prefill_chunk else [SAMPLED_TOKEN] for rid in ids]
    return ModelRunnerOutput(
        req_ids=ids,
        req_id_to_index={rid: index for index, rid in enumerate(ids)},
        sampled_token_ids=sampled,
    )


class BatchQueue:
    """The engine core's loop under asynchronous scheduling,
    EngineCore.step_with_batch_queue (vllm/v1/engine/core.py:708-825), with
    the fake runner as its executor. Each ``step()`` is one call of it: if
    the scheduler has requests it forms a batch (schedule()) and queues it
    with its future; while the queue holds fewer than
    max_concurrent_batches (2 under async scheduling with one pipeline
    stage: vllm/config/vllm.py:587-597) and the batch ran something or the
    scheduler still has requests, the call returns without applying
    anything; otherwise it pops the oldest batch and applies its output
    (update_from_output). So batch k+1 is formed before batch k's output
    is applied."""

    def __init__(self, scheduler, patterns: dict | None = None) -> None:
        self.scheduler = scheduler
        self.size = int(scheduler.vllm_config.max_concurrent_batches)
        assert self.size == 2, self.size
        self.queue: collections.deque = collections.deque()
        #: speculative decoding: each request's acceptance pattern (spec_sampled), else None
        self.patterns = patterns

    def in_flight_tokens(self) -> bool:
        """Some queued batch scheduled a token (its output will change the
        scheduler's state when applied)."""
        return any(output.total_num_scheduled_tokens > 0 for _, output, _ in self.queue)

    def step(self, on_schedule):
        """One step_with_batch_queue call. ``on_schedule(output)`` is called
        on a batch as soon as it is formed and returns its tag. Returns
        (the batch formed or None, (tag, output, engine outputs, ids that
        received a token) of the batch applied, or None)."""
        scheduler = self.scheduler
        formed = None
        if scheduler.has_requests():
            formed = scheduler.schedule()
            promised = None
            if self.patterns is not None:  # the output tokens the batches in flight will bring, per request
                promised = collections.Counter()
                for _, _, queued in self.queue:
                    for rid, tokens in zip(queued.req_ids, queued.sampled_token_ids):
                        promised[rid] += len(tokens)
            future = fake_model_output(scheduler, formed, self.patterns, promised)
            self.queue.appendleft((on_schedule(formed), formed, future))
            executed = formed.total_num_scheduled_tokens > 0
            if len(self.queue) < self.size and (executed or scheduler.has_requests()):
                return formed, None
        elif not self.queue:
            return None, None
        tag, output, future = self.queue.pop()
        engine_outputs = scheduler.update_from_output(output, future)
        received = [
            o.request_id for outputs in engine_outputs.values() for o in outputs.outputs if o.new_token_ids
        ]
        return formed, (tag, output, engine_outputs, received)


def finished_ids(engine_outputs):
    """The request ids whose output carries a finish reason, in output order,
    with the cached-token count each output reports (None if it has none)."""
    result = []
    for outputs in engine_outputs.values():
        for output in outputs.outputs:
            if output.finish_reason is not None:
                result.append(output.request_id)
    return result


def reported_cached(engine_outputs) -> dict[str, int]:
    """request id -> prefill_stats.num_cached_tokens, for the outputs that
    carry prefill stats (the first output of a request)."""
    cached = {}
    for outputs in engine_outputs.values():
        for output in outputs.outputs:
            stats = getattr(output, "prefill_stats", None)
            if stats is not None:
                cached[output.request_id] = stats.num_cached_tokens
    return cached


# ---------------------------------------------------------------------------
# The KV connector: the decode side of P/D (docs/design/kv-connector.md in serq-ref)


def remote_kv_module():
    """oracle/real/remote_kv.py, the oracle's connector and its worker's
    side, imported from this file's directory (where vLLM's factory finds
    it by ``kv_connector_module_path``)."""
    here = os.path.dirname(os.path.abspath(__file__))
    if here not in sys.path:
        sys.path.insert(0, here)
    import remote_kv

    return remote_kv


def has_remote(job) -> bool:
    """Some request of the scenario gives ``remote``: the scheduler has the connector."""
    return any("remote" in r for r in job["requests"])


def transfers_outstanding(scheduler) -> bool:
    return has_remote_kv(scheduler) and remote_kv_module().outstanding(scheduler)


def has_remote_kv(scheduler) -> bool:
    return getattr(scheduler, "connector", None) is not None


# ---------------------------------------------------------------------------
# Serve-by orders: vLLM's priority path with the running list re-sorted


def parse_serve(text: str):
    """A serve-by key in serQ syntax (``admission``, ``-admission``,
    ``decoding ? 1 : 0``, numbers, unary - and !, * / + -, comparisons, && ||,
    ?:) as the IR expression NAME.target.json writes."""
    tokens = []
    i = 0
    two = ("<=", ">=", "==", "!=", "&&", "||")
    while i < len(text):
        c = text[i]
        if c.isspace():
            i += 1
        elif text[i : i + 2] in two:
            tokens.append(text[i : i + 2])
            i += 2
        elif c in "+-*/<>!?:()":
            tokens.append(c)
            i += 1
        elif c.isdigit() or c == ".":
            j = i
            while j < len(text) and (text[j].isdigit() or text[j] == "."):
                j += 1
            tokens.append(float(text[i:j]))
            i = j
        elif c.isalpha() or c == "_":
            j = i
            while j < len(text) and (text[j].isalnum() or text[j] == "_"):
                j += 1
            tokens.append(text[i:j])
            i = j
        else:
            raise ValueError(f"serve key {text!r}: unexpected {c!r}")
    pos = [0]

    def peek():
        return tokens[pos[0]] if pos[0] < len(tokens) else None

    def take(expected=None):
        tok = peek()
        if expected is not None and tok != expected:
            raise ValueError(f"serve key {text!r}: expected {expected!r}, found {tok!r}")
        pos[0] += 1
        return tok

    binary_levels = [
        (("||",), {"||": "Or"}),
        (("&&",), {"&&": "And"}),
        (("==", "!="), {"==": "Eq", "!=": "Ne"}),
        (("<", "<=", ">", ">="), {"<": "Lt", "<=": "Le", ">": "Gt", ">=": "Ge"}),
        (("+", "-"), {"+": "Add", "-": "Sub"}),
        (("*", "/"), {"*": "Mul", "/": "Div"}),
    ]

    def conditional():
        cond = binary(0)
        if peek() == "?":
            take("?")
            then = conditional()
            take(":")
            other = conditional()
            return {"Cond": [cond, then, other]}
        return cond

    def binary(level):
        if level == len(binary_levels):
            return unary()
        ops, names = binary_levels[level]
        left = binary(level + 1)
        while peek() in ops:
            op = take()
            left = {"Binary": [names[op], left, binary(level + 1)]}
        return left

    def unary():
        tok = peek()
        if tok == "-":
            take()
            return {"Unary": ["Neg", unary()]}
        if tok == "!":
            take()
            return {"Unary": ["Not", unary()]}
        if tok == "(":
            take()
            inner = conditional()
            take(")")
            return inner
        if isinstance(tok, float):
            take()
            return {"Num": tok}
        if tok in ("admission", "decoding"):
            take()
            return {"Ctx": tok.capitalize()}
        raise ValueError(f"serve key {text!r}: vLLM's scheduler observes admission and decoding only, not {tok!r}")

    expr = conditional()
    if peek() is not None:
        raise ValueError(f"serve key {text!r}: unexpected {peek()!r}")
    return expr


def serve_keys(job) -> list:
    """The serve-by keys of a scenario: ``serve_by`` (IR), else ``serve``
    (syntax; several keys separated by commas at the top level)."""
    if job.get("serve_by") is not None:
        return list(job["serve_by"])
    text = job.get("serve")
    if text is None:
        return []
    parts, depth, start = [], 0, 0
    for index, c in enumerate(text):
        depth += c == "("
        depth -= c == ")"
        if c == "," and depth == 0:
            parts.append(text[start:index])
            start = index + 1
    parts.append(text[start:])
    return [parse_serve(part) for part in parts]


def is_decoding(request) -> bool:
    """serQ's ``decoding`` as vLLM observes it: the request has sampled a
    token and has at most one token left to compute (its last sample). Under
    asynchronous scheduling a token sampled by a batch whose output is not
    applied yet is an output placeholder (async_scheduler.py:24-56): it
    counts as sampled (num_output_placeholders is 0 on the synchronous
    engine, so this reads as it always did there)."""
    placeholders = request.num_output_placeholders
    return (request.num_output_tokens + placeholders > 0
            and request.num_tokens + placeholders - request.num_computed_tokens <= 1)


def evaluate_key(expr, request, admission: int) -> float:
    (tag, value), = expr.items()
    if tag == "Num":
        return float(value)
    if tag == "Ctx":
        if value == "Admission":
            return float(admission)
        if value == "Decoding":
            return 1.0 if is_decoding(request) else 0.0
        raise ValueError(f"vLLM's scheduler does not observe {value!r}")
    if tag == "Unary":
        op, inner = value
        x = evaluate_key(inner, request, admission)
        return -x if op == "Neg" else float(x == 0)
    if tag == "Binary":
        op, a, b = value
        x, y = evaluate_key(a, request, admission), evaluate_key(b, request, admission)
        table = {
            "Add": lambda: x + y, "Sub": lambda: x - y, "Mul": lambda: x * y,
            "Div": lambda: x / y, "Lt": lambda: float(x < y), "Le": lambda: float(x <= y),
            "Gt": lambda: float(x > y), "Ge": lambda: float(x >= y), "Eq": lambda: float(x == y),
            "Ne": lambda: float(x != y), "And": lambda: float(x != 0 and y != 0),
            "Or": lambda: float(x != 0 or y != 0),
        }
        return table[op]()
    if tag == "Cond":
        cond, then, other = value
        return evaluate_key(then if evaluate_key(cond, request, admission) != 0 else other, request, admission)
    raise ValueError(f"unsupported serve key {tag!r}")


class ObservedScheduler(Scheduler):
    """vLLM's Scheduler, unchanged in what it decides, that also counts what
    the answers report as ``features``: steps that preempted, preemptions
    whose victim was the request allocating (self-preemption), and steps
    blocked at the head of the waiting queue (a request waited, a request
    slot and token budget were left, nothing preempted, and nothing was
    admitted: the head did not fit the KV cache)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.features = {"preempt_steps": 0, "preemptions": 0, "self_preemptions": 0, "blocked_steps": 0}
        self._allocating = None
        self._in_schedule = False
        self.cache_computed_only = False

    def _preempt_request(self, request, timestamp, drop_stale_output=False):
        self.features["preemptions"] += 1
        if request is self._allocating:
            self.features["self_preemptions"] += 1
        if self.cache_computed_only:
            self._uncache_past_computed(request)
        super()._preempt_request(request, timestamp, drop_stale_output)

    def _uncache_past_computed(self, request):
        """The experiment ``cache_computed_only``: forget the hashes of the
        victim's blocks past what it has computed (num_computed_tokens is only
        advanced after the pass, so a victim withdrawn from it counts only
        the tokens of earlier steps), so that freeing them caches nothing
        the request did not compute."""
        manager = self.kv_cache_manager
        computed_blocks = request.num_computed_tokens // self.block_size
        for blocks in manager.get_blocks(request.request_id).blocks:
            for block in blocks[computed_blocks:]:
                if block.block_hash is not None:
                    manager.block_pool._maybe_evict_cached_block(block)

    def _watch_allocations(self):
        manager = self.kv_cache_manager
        original = type(manager).allocate_slots

        def allocate_slots(request, *args, **kwargs):
            self._allocating = request
            return original(manager, request, *args, **kwargs)

        manager.allocate_slots = allocate_slots

    def schedule(self, throttle_prefills: bool = False):
        self._watch_allocations()
        try:
            output = super().schedule(throttle_prefills)
        finally:
            del self.kv_cache_manager.allocate_slots
            self._allocating = None
        if output.preempted_req_ids:
            self.features["preempt_steps"] += 1
        elif (
            len(self.waiting) > 0
            and not output.scheduled_new_reqs
            and not getattr(output.scheduled_cached_reqs, "resumed_req_ids", None)
            and len(self.running) < self.max_num_running_reqs
            and output.total_num_scheduled_tokens < self.max_num_scheduled_tokens
        ):
            self.features["blocked_steps"] += 1
        return output


class ServeByScheduler(ObservedScheduler):
    """vLLM's scheduler on its priority path, its running list re-sorted
    before every step by the serve-by keys and then by admission number.

    The priority path is what separates the serving order from the victim:
    on the FCFS path the victim is running[-1], the end of the (sorted) list;
    on the priority path it is the running request with the largest
    (priority, arrival_time), and each request's priority is set to the
    number of its latest admission, so the victim is the request admitted
    last, as serQ's preempt lifo has it. The waiting queue is then a heap on
    (priority, arrival_time); priorities keep it first come first served: a
    new request gets the order of its add_request (1, 2, ...), a preempted
    one a decreasing negative number (the latest preempted first, as the FCFS
    path's prepend would put it).

    ``self_preempt_ends_pass`` (off by default) restores the older rule
    (0c87a197, seed 001): a running request that preempts itself ends the
    running loop. vLLM 0.33.0's priority path goes on to the requests behind
    it instead (vllm/v1/core/sched/scheduler.py:982-996); with the switch on,
    the requests after the self-victim are skipped for the rest of that pass
    through the running loop's own per-request skip
    (next_decode_eligible_step, scheduler.py:816-820), which nothing else
    sets on a single-stage engine.
    """

    def configure(self, keys, self_preempt_ends_pass=False):
        assert not self.running and not self.waiting
        self.serve_keys = list(keys)
        self.self_preempt_ends_pass = self_preempt_ends_pass
        self.admission_of: dict[str, int] = {}
        self.num_admissions = 0
        self.num_added = 0
        self.num_preempted = 0
        self._held_back: list = []

    def add_request(self, request):
        self.num_added += 1
        request.priority = self.num_added
        super().add_request(request)

    def _preempt_request(self, request, timestamp, drop_stale_output=False):
        self.num_preempted += 1
        request.priority = -self.num_preempted
        self.admission_of.pop(request.request_id, None)
        if self.self_preempt_ends_pass and request is self._allocating:
            # A running request is its own victim: nothing behind it runs in
            # this pass (the older rule).
            for other in self.running:
                if other is not request:
                    self._held_back.append((other, other.next_decode_eligible_step))
                    other.next_decode_eligible_step = math.inf
        super()._preempt_request(request, timestamp, drop_stale_output)

    def sort_key(self, request):
        admission = self.admission_of[request.request_id]
        return tuple(evaluate_key(k, request, admission) for k in self.serve_keys) + (admission,)

    def schedule(self, throttle_prefills: bool = False):
        self.running.sort(key=self.sort_key)
        self._held_back = []
        try:
            output = super().schedule(throttle_prefills)
        finally:
            for other, value in self._held_back:
                other.next_decode_eligible_step = value
            self._held_back = []
        # What this step admitted, in the order it was admitted (appended).
        for request in self.running:
            if request.request_id not in self.admission_of:
                self.num_admissions += 1
                self.admission_of[request.request_id] = self.num_admissions
                request.priority = self.num_admissions
        return output


# ---------------------------------------------------------------------------
# Scenarios


def scenario_token_ids(index: int, prompt: int) -> list[int]:
    return [(index * 7919 + k) % 50000 + 1 for k in range(prompt)]


# Shared prefixes (docs/design/shared-prefixes.md): a request's
# ``prompt_segments`` [[KEY, LENGTH], ...] say which tokens it shares.
SEGMENT_TOKEN_BASE = 10_000_000
SEGMENT_KEY_STRIDE = 100_000
OWN_SAMPLED_BASE = 20_000_000


def segment_key_numbers(job) -> dict:
    """Each segment key of the scenario, numbered from 1 in order of first
    appearance (requests by position, segments in order); a key is compared
    as JSON text, so "a" and 1 are different keys."""
    numbers: dict = {}
    for r in job["requests"]:
        for key, _ in r.get("prompt_segments", ()):
            numbers.setdefault(json.dumps(key), len(numbers) + 1)
    return numbers


def segment_token_ids(job, index: int) -> list[int]:
    """Request ``index``'s prompt token ids with its segments: the k-th token
    of a segment of key number n is SEGMENT_TOKEN_BASE + n * SEGMENT_KEY_STRIDE
    + k (distinct keys, distinct tokens; a segment of one key is that key's
    head), then the request's own tokens (the recorded convention's at
    their positions) to the prompt's length."""
    r = job["requests"][index]
    numbers = segment_key_numbers(job)
    tokens: list[int] = []
    for key, length in r.get("prompt_segments", ()):
        if int(length) >= SEGMENT_KEY_STRIDE:
            raise ValueError(f"a segment of {length} tokens: at most {SEGMENT_KEY_STRIDE - 1}")
        n = numbers[json.dumps(key)]
        tokens.extend(SEGMENT_TOKEN_BASE + n * SEGMENT_KEY_STRIDE + k for k in range(int(length)))
    prompt = int(r["prompt"])
    if len(tokens) > prompt:
        raise ValueError(f"request {index}'s segments have {len(tokens)} tokens, more than its prompt {prompt}")
    own = scenario_token_ids(index, prompt)
    return tokens + own[len(tokens):]


def has_segments(job) -> bool:
    return any("prompt_segments" in r for r in job["requests"])


def own_sampled_token(rid: str) -> int:
    """The token request ``rid`` samples when its output is its own: a
    scenario's request i, OWN_SAMPLED_BASE + i; a replay's turn t of session
    s (``s:t``), OWN_SAMPLED_BASE + 1000 s + t."""
    if ":" in rid:
        session, turn = rid.split(":")
        return OWN_SAMPLED_BASE + 1000 * int(session) + int(turn)
    return OWN_SAMPLED_BASE + int(rid)


def own_sampled_tokens(cls: type) -> type:
    """``cls`` whose fake model samples, for request i, the token
    OWN_SAMPLED_BASE + i instead of SAMPLED_TOKEN: generated tokens are the
    request's own, so two requests with the same prompt never share a block
    of output (the model's "units past the content are the session's
    own"). The tokens are rewritten as the output is applied, in both
    engines; nothing the scheduler decides reads their values."""

    def update_from_output(self, scheduler_output, model_runner_output):
        ids = model_runner_output.req_ids
        sampled = [[own_sampled_token(rid) if t == SAMPLED_TOKEN else t for t in tokens]
                   for rid, tokens in zip(ids, model_runner_output.sampled_token_ids)]
        engine_outputs = cls.update_from_output(self, scheduler_output,
                                                dataclasses.replace(model_runner_output, sampled_token_ids=sampled))
        reported = self.__dict__.setdefault("reported_cached", {})
        for rid, n in reported_cached(engine_outputs).items():
            reported.setdefault(rid, int(n))
        return engine_outputs

    return type("OwnSampled" + cls.__name__, (cls,), {"update_from_output": update_from_output})


def run_scenario(job) -> dict:
    block_size = int(job.get("block_size", 16))
    chunk = int(job.get("chunk", 0) or 0)
    keys = serve_keys(job)
    serve = bool(keys) or job.get("serve") is not None or job.get("serve_by") is not None
    priorities = job.get("policy", "fcfs") == "priority"
    if serve and priorities:
        raise ValueError("a scenario has a serve-by key or user priorities, not both")
    scheduler = make_scheduler(
        budget=int(job["budget"]),
        max_seqs=int(job["max_seqs"]),
        block_size=block_size,
        num_blocks=int(job["num_blocks"]),
        chunk=chunk,
        prefix_caching=bool(job.get("prefix_caching", False)),
        max_model_len=int(job.get("max_model_len", DEFAULT_SCENARIO_MAX_MODEL_LEN)),
        policy="priority" if serve or priorities else "fcfs",
        cls=(remote_kv_module().with_remote_kv if has_remote(job) else (lambda c, d: c))(
            (own_sampled_tokens if has_segments(job) else (lambda c: c))(
                offload_class(job, ServeByScheduler if serve else ObservedScheduler)),
            {str(i): int(r.get("kv_delay", 0)) for i, r in enumerate(job["requests"])}),
        async_scheduling=bool(job.get("async", False)),
        watermark=float(job.get("watermark", 0.0)),
        spec_tokens=int(job.get("spec_tokens", 0) or 0),
        spec_method=str(job.get("spec_method", "ngram")),
        kv_groups=job.get("kv_groups"),
        remote_kv=has_remote(job),
        offload=job.get("offload"),
    )
    # speculative decoding: each request's acceptance pattern (default [0]: every draft rejected)
    patterns = ({str(i): [int(a) for a in r.get("accept", [0])] for i, r in enumerate(job["requests"])}
                if scheduler.num_spec_tokens else None)
    if serve:
        scheduler.configure(keys, bool(job.get("self_preempt_ends_pass", False)))
    scheduler.cache_computed_only = bool(job.get("cache_computed_only", False))
    step_trace = [] if job.get("step_trace") else None
    max_steps = int(job.get("max_steps", DEFAULT_SCENARIO_MAX_STEPS))
    refused: dict[str, str] = {}
    messages: dict[str, str] = {}
    configuration = startup_refusal(scheduler) if job.get("max_model_len") is not None else None
    for i, r in enumerate(job["requests"]):
        why = configuration or prompt_refusal(scheduler, int(r["prompt"]))
        if why is None and job.get("max_model_len") is None:
            why = fit_refusal(scheduler, int(r["prompt"]), int(r["out"]))
        if why is not None:
            refused[str(i)] = why[0]
            if why[1] is not None:
                messages[str(i)] = why[1]
    pending = sorted(
        ((int(r.get("arrive", 0)), i, r) for i, r in enumerate(job["requests"]) if str(i) not in refused),
        key=lambda x: (x[0], x[1]),
    )
    added = 0

    def add_arrival(arrival) -> None:
        """A request joins (user priorities: its arrival_time is its place in
        the order requests are added, never the wall clock)."""
        nonlocal added
        _, i, r = arrival
        added += 1
        token_ids = segment_token_ids(job, i) if has_segments(job) else scenario_token_ids(i, int(r["prompt"]))
        scheduler.add_request(make_request(str(i), token_ids, int(r["out"]), block_size,
                                           priority=int(r.get("priority", 0)),
                                           arrival_time=float(added) if priorities else None,
                                           remote=r.get("remote") if has_remote(job) else None))

    first: dict[str, int] = {}
    done: dict[str, int] = {}
    preemptions = 0
    step = 0
    status = "finished"
    if job.get("async"):
        step, preemptions, status = drive_scenario_async(
            scheduler, pending, add_arrival, first, done, step_trace, max_steps, patterns)
    while not job.get("async"):
        while pending and pending[0][0] <= step:
            add_arrival(pending.pop(0))
        if not scheduler.has_requests():
            if not pending:
                break
            # Idle until the next arrival: the steps between do nothing.
            step = pending[0][0]
            continue
        if step >= max_steps:
            status = f"step limit {max_steps}"
            break
        step += 1
        scheduler.clock = step  # the step clock, for a connector's worker played here (oracle/real/offload.py)
        output = scheduler.schedule()
        preemptions += len(output.preempted_req_ids or ())
        if step_trace is not None:
            record_step(step_trace, step, output)
        if patterns is not None:
            sampled, engine_outputs = fake_model_step_spec(scheduler, output, patterns)
        else:
            sampled, engine_outputs = fake_model_step(scheduler, output)
        for rid in sampled:
            first.setdefault(rid, step)
        for rid in finished_ids(engine_outputs):
            done[rid] = step
        stalled = (
            output.total_num_scheduled_tokens == 0
            and not output.preempted_req_ids
            and not output.finished_req_ids
            and not pending
            and scheduler.has_requests()
            and not transfers_outstanding(scheduler)
        )
        if stalled:
            status = f"stalled at step {step}: nothing schedulable and nothing to come"
            break
    answer = {
        "first": first,
        "done": done,
        "preemptions": preemptions,
        "steps": step,
        "config": {
            "budget": scheduler.max_num_scheduled_tokens,
            "max_seqs": scheduler.max_num_running_reqs,
            "chunk": scheduler.scheduler_config.long_prefill_token_threshold,
            "block_size": scheduler.block_size,
            "num_blocks": scheduler.kv_cache_config.num_blocks,
        },
        "status": status,
        "features": scheduler.features,
        "unfinished": sorted((str(i) for i in range(len(job["requests"]))
                              if str(i) not in done and str(i) not in refused), key=int),
    }
    if refused:
        answer["refused"] = refused
        answer["vllm_messages"] = messages
    if step_trace is not None:
        answer["step_trace"] = step_trace
    if job.get("async"):
        answer["async"] = True
    if patterns is not None:
        answer["spec_tokens"] = scheduler.num_spec_tokens
        if job.get("spec_method") is not None:  # the drafter's slots, as vLLM set them (SPEC_METHODS)
            answer["spec_lookahead"] = scheduler.num_lookahead_tokens
            answer["spec_draft_slots"] = scheduler.vllm_config.speculative_config.max_num_new_slots_for_drafting
    if job.get("kv_groups") is not None:
        answer["kv_groups"] = [kv_group_answer(scheduler, g.kv_cache_spec)
                               for g in scheduler.kv_cache_config.kv_cache_groups]
    if has_segments(job):
        reported = getattr(scheduler, "reported_cached", {})
        answer["cached"] = {rid: reported[rid] for rid in sorted(reported, key=int)}
    if job.get("offload") is not None:  # the CPU tier, each request's loads, the chunks stored and evicted
        answer["offload"] = offload_module().answer(scheduler)
    if has_remote(job):  # each transfer's [step started, step reported done]
        transfers = getattr(scheduler, "transfers", {})
        answer["transfers"] = {rid: transfers[rid] for rid in sorted(transfers, key=int)}
    return answer


def kv_group_answer(scheduler, spec) -> dict:
    """A KV cache group as the answer states it: its kind, a sliding
    group's window and vLLM's admission cap in blocks."""
    if isinstance(spec, SlidingWindowSpec):
        return {"kind": "sliding", "window": spec.sliding_window,
                "cap": spec.max_admission_blocks_per_request(
                    max_in_flight_tokens=scheduler.vllm_config.max_in_flight_tokens,
                    max_model_len=scheduler.max_model_len)}
    return {"kind": "full"}


def drive_scenario_async(scheduler, pending, add_arrival, first, done, step_trace, max_steps, patterns=None):
    """A scenario under asynchronous scheduling (BatchQueue: the engine
    core's step_with_batch_queue). The step clock: batch k is the k-th
    schedule() call; a request with ``arrive: k`` is added before the
    (k+1)-th call; a token's step (``first``, ``done``) is the number of the
    batch that sampled it, though its output is applied one call later;
    ``steps`` is the number of schedule() calls (the last ones form empty
    batches: the one formed while the last token was in flight, and the one
    that flushes the finished ids). Returns (steps, preemptions, status)."""
    queue = BatchQueue(scheduler, patterns)
    step = preemptions = 0
    status = "finished"
    while True:
        while pending and pending[0][0] <= step:
            add_arrival(pending.pop(0))
        if not scheduler.has_requests() and not queue.queue:
            if not pending:
                break
            step = pending[0][0]  # idle until the next arrival
            continue
        if scheduler.has_requests() and step >= max_steps:
            status = f"step limit {max_steps}"
            break
        in_flight = queue.in_flight_tokens()

        def on_schedule(output):
            nonlocal step
            step += 1
            if step_trace is not None:
                record_step(step_trace, step, output)
            return step

        scheduler.clock = step + 1  # the number of the batch formed next (oracle/real/offload.py)
        formed, applied = queue.step(on_schedule)
        if formed is not None:
            preemptions += len(formed.preempted_req_ids or ())
        if applied is not None:
            batch, _, engine_outputs, received = applied
            for rid in received:
                first.setdefault(rid, batch)
            for rid in finished_ids(engine_outputs):
                done[rid] = batch
        stalled = (
            formed is not None
            and formed.total_num_scheduled_tokens == 0
            and not formed.preempted_req_ids
            and not formed.finished_req_ids
            and not in_flight
            and not pending
            and scheduler.has_requests()
            and not transfers_outstanding(scheduler)
        )
        if stalled:
            status = f"stalled at step {step}: nothing schedulable and nothing to come"
            break
    return step, preemptions, status


def record_step(step_trace: list, time_, output) -> None:
    """One ``schedule()`` call's decisions, if it made any: [time, {id:
    tokens}, [preempted ids]]."""
    tokens = {rid: int(n) for rid, n in output.num_scheduled_tokens.items() if n}
    preempted = sorted(output.preempted_req_ids or ())
    if tokens or preempted:
        step_trace.append([time_, dict(sorted(tokens.items())), preempted])


# ---------------------------------------------------------------------------
# CPU offloading (docs/design/cpu-offloading.md in serq-ref)


def offload_module():
    """oracle/real/offload.py: vLLM's OffloadingConnector's worker, played."""
    here = os.path.dirname(os.path.abspath(__file__))
    if here not in sys.path:
        sys.path.insert(0, here)
    import offload

    return offload


def offload_class(job, cls: type) -> type:
    """``cls`` playing the offloading connector's worker when the scenario
    gives ``offload`` (its delays, oracle/real/offload.py), else ``cls``."""
    spec = job.get("offload")
    if spec is None:
        return cls
    fields = {**offload_module().DEFAULTS, **spec}
    return offload_module().with_offload(cls, int(fields["load_delay"]), int(fields["store_delay"]))


# ---------------------------------------------------------------------------
# Replays


def read_trace(job) -> dict[int, list[dict]]:
    """session -> its turns in turn order, each {turn, new, out, think, forced}."""
    if job.get("rows") is not None:
        rows = job["rows"]
    else:
        text = job["trace"]
        lines = [line for line in io.StringIO(text).read().splitlines() if line.strip()]
        header = [h.strip() for h in lines[0].split(",")]
        rows = [dict(zip(header, (v.strip() for v in line.split(",")))) for line in lines[1:]]
    sessions: dict[int, list[dict]] = {}
    for row in rows:
        turn = {
            "turn": int(row["turn"]),
            "new": int(row["new"]),
            "out": int(row["out"]),
            "think": float(row["think"]),
            "forced": int(float(row.get("forced", 0) or 0)),
        }
        sessions.setdefault(int(row["session"]), []).append(turn)
    for turns in sessions.values():
        turns.sort(key=lambda t: t["turn"])
    return dict(sorted(sessions.items()))


def session_token_ids(session: int, new: int, nonce: int | None) -> list[int]:
    ids = [(session + 1) * 100003 + j for j in range(new)]
    if nonce is not None and ids:
        ids[0] = nonce
    return ids


#: A replay's shared system prompt (``shared_head``: N): token j < N of every session's range is this + j.
SHARED_HEAD_BASE = 30_000_000


def shared_head_of(job) -> int:
    """The replay's ``shared_head``: how many tokens at the head of every
    session's range are one prompt every session shares (0: none, the
    recorded convention)."""
    return int(job.get("shared_head", 0) or 0)


def with_shared_head(ids: list[int], head: int, forced: bool) -> list[int]:
    """A turn's token ids with the shared system prompt's at its first
    ``head`` positions; a session whose head holds a nonce (a forced turn
    and the turns after it) keeps the nonce at position 0, so it shares
    nothing (the forced turn's meaning: it matches nothing cached)."""
    return [SHARED_HEAD_BASE + j if j < head and not (j == 0 and forced) else t for j, t in enumerate(ids)]


def format_time(x) -> str:
    return "" if x is None else repr(float(x))


def run_replay(job) -> dict:
    """The replay protocol of ../shared/oracle/README.md, one time unit per
    scheduler step. Sends at one instant join in the order they were made
    (first turns in session order at the start, later turns in the order
    their previous turn finished)."""
    sessions = read_trace(job)
    block_size = int(job.get("block_size", 16))
    spacing = float(job["spacing"])
    scheduler = make_scheduler(
        budget=int(job["budget"]),
        max_seqs=int(job["max_seqs"]),
        block_size=block_size,
        num_blocks=int(job["blocks"]) + 1,
        chunk=int(job.get("chunk", 0) or 0),
        prefix_caching=bool(job.get("prefix_caching", True)),
        max_model_len=int(job.get("max_model_len", DEFAULT_REPLAY_MAX_MODEL_LEN)),
        async_scheduling=bool(job.get("async", False)),
        **({"cls": own_sampled_tokens(ObservedScheduler)} if shared_head_of(job) else {}),
    )
    scheduler.cache_computed_only = bool(job.get("cache_computed_only", False))
    step_trace = [] if job.get("step_trace") else None
    max_steps = int(job.get("max_steps", DEFAULT_REPLAY_MAX_STEPS))
    order = list(sessions)
    position = {s: index for index, s in enumerate(order)}
    sends: list = []  # heap of (time, sequence, session, turn index)
    sequence = 0
    for s in order:
        heapq.heappush(sends, (position[s] * spacing, sequence, s, 0))
        sequence += 1
    forced_count = {s: 0 for s in order}
    nonce_of: dict[int, int | None] = {s: None for s in order}
    rows: dict[str, dict] = {}
    cached_at_admission: dict[str, int] = {}
    clock = 0.0
    steps = 0
    empty_in_a_row = 0
    status = "finished"
    queue = BatchQueue(scheduler) if job.get("async") else None

    def deadlock() -> str:
        """The status of a replay whose unfinished requests nothing can schedule, with nothing left to send."""
        running, waiting = scheduler.get_request_counts()
        return (f"deadlock at clock {clock!r} after {steps} steps: nothing schedulable ({running} running, "
                f"{waiting} waiting) and nothing to come")

    def apply_outputs(at: float, sampled, engine_outputs) -> None:
        """A step's outputs applied at clock ``at``: first tokens, the cached
        tokens reported, finishes, and each finished turn's next send after
        its think time (in the order the turns finished)."""
        nonlocal sequence
        for rid in sampled:
            if rows[rid]["first"] is None:
                rows[rid]["first"] = at
        for rid, cached in reported_cached(engine_outputs).items():
            rows[rid]["cached"] = cached
        for rid in finished_ids(engine_outputs):
            rows[rid]["done"] = at
            s, k = (int(x) for x in rid.split(":"))
            if k + 1 < len(sessions[s]):
                heapq.heappush(sends, (at + sessions[s][k]["think"], sequence, s, k + 1))
                sequence += 1

    while True:
        while sends and sends[0][0] <= clock:
            t, _, s, k = heapq.heappop(sends)
            turn = sessions[s][k]
            if turn["forced"]:
                forced_count[s] += 1
                nonce_of[s] = NONCE_BASE + s * 10000 + forced_count[s]
            rid = f"{s}:{k}"
            tokens = with_shared_head(session_token_ids(s, turn["new"], nonce_of[s]), shared_head_of(job),
                                      nonce_of[s] is not None)
            scheduler.add_request(make_request(rid, tokens, turn["out"], block_size))
            rows[rid] = {
                "session": s, "turn": turn["turn"], "sent": t, "first": None, "done": None,
                "prompt": turn["new"], "cached": None, "out": turn["out"],
            }
        if not scheduler.has_requests() and not (queue is not None and queue.queue):
            if not sends:
                break
            clock = max(clock, sends[0][0])  # idle: jump to the next send
            continue
        if steps >= max_steps:
            status = f"step limit {max_steps} at clock {clock!r}"
            break
        if queue is not None:
            # Asynchronous scheduling: one step_with_batch_queue call.
            in_flight = queue.in_flight_tokens()

            def on_schedule(output):
                # A batch takes one time unit if it ran tokens or was formed
                # while a batch that ran tokens was in flight (the batch
                # formed before finished requests are applied, though empty:
                # serQ's schedule ahead, docs/design/async-scheduling.md);
                # its tokens are sampled at its end (the clock after it).
                nonlocal clock, steps
                if step_trace is not None:
                    record_step(step_trace, clock, output)
                for new in output.scheduled_new_reqs:
                    cached_at_admission.setdefault(new.req_id, new.num_computed_tokens)
                if output.total_num_scheduled_tokens > 0 or queue.in_flight_tokens():
                    steps += 1
                    clock += 1.0
                return clock

            formed, applied = queue.step(on_schedule)
            if applied is not None:
                end, _, engine_outputs, received = applied
                apply_outputs(end, received, engine_outputs)
            if formed is None or formed.total_num_scheduled_tokens > 0:
                empty_in_a_row = 0
                continue
            empty_in_a_row += 1
            if empty_in_a_row > 1000:
                status = f"livelock at clock {clock!r}: 1000 schedule() calls in a row ran nothing"
                break
            if in_flight or formed.preempted_req_ids or formed.finished_req_ids or applied is not None and applied[1].total_num_scheduled_tokens > 0:
                continue
            if not sends:
                if scheduler.get_num_unfinished_requests() > 0:
                    status = deadlock()
                    break
                continue
            clock = max(clock, sends[0][0])
            continue
        output = scheduler.schedule()
        if step_trace is not None:
            record_step(step_trace, clock, output)
        if output.total_num_scheduled_tokens == 0:
            # Nothing ran: no time passes. Wait for the next send, or stop.
            fake_model_step(scheduler, output)
            empty_in_a_row += 1
            if empty_in_a_row > 1000:
                status = f"livelock at clock {clock!r}: 1000 schedule() calls in a row ran nothing"
                break
            if output.preempted_req_ids or output.finished_req_ids:
                continue
            if not sends:
                if scheduler.get_num_unfinished_requests() > 0:
                    status = deadlock()
                break
            clock = max(clock, sends[0][0])
            continue
        empty_in_a_row = 0
        for new in output.scheduled_new_reqs:
            cached_at_admission.setdefault(new.req_id, new.num_computed_tokens)
        steps += 1
        clock += 1.0
        sampled, engine_outputs = fake_model_step(scheduler, output)
        apply_outputs(clock, sampled, engine_outputs)
    for rid, row in rows.items():
        if row["cached"] is None and rid in cached_at_admission:
            row["cached"] = cached_at_admission[rid]
        elif row["cached"] is not None and rid in cached_at_admission:
            assert row["cached"] == cached_at_admission[rid], (rid, row["cached"], cached_at_admission[rid])
    ordered = sorted(rows.values(), key=lambda r: (r["session"], r["turn"]))
    not_sent = [
        (s, sessions[s][k]["turn"])
        for s in order
        for k in range(len(sessions[s]))
        if f"{s}:{k}" not in rows
    ]
    unfinished = [[r["session"], r["turn"]] for r in ordered if r["done"] is None]
    return {
        "rows": [[r[c] for c in REPLAY_COLUMNS] for r in ordered],
        "csv": replay_csv(ordered),
        "status": status,
        "steps": steps,
        "clock": clock,
        "features": scheduler.features,
        "unfinished": unfinished,
        "never_sent": [list(x) for x in not_sent],
        **({} if step_trace is None else {"step_trace": step_trace}),
        **({"async": True} if job.get("async") else {}),
    }


def replay_csv(rows: list[dict]) -> str:
    lines = [",".join(REPLAY_COLUMNS)]
    for r in rows:
        lines.append(",".join([
            str(r["session"]), str(r["turn"]), format_time(r["sent"]), format_time(r["first"]),
            format_time(r["done"]), str(r["prompt"]),
            "" if r["cached"] is None else str(r["cached"]), str(r["out"]),
        ]))
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------
# The command line


def answer(job) -> dict:
    kind = job.get("kind") or ("scenario" if "requests" in job else "replay")
    started = time.perf_counter()
    started_cpu = time.process_time()
    try:
        if kind == "scenario":
            result = run_scenario(job)
        elif kind == "replay":
            result = run_replay(job)
        else:
            raise ValueError(f"unknown job kind {kind!r}")
    except Exception as error:  # one bad job must not sink a batch
        result = {"error": f"{type(error).__name__}: {error}"}
    result["seconds"] = round(time.perf_counter() - started, 3)
    result["cpu_seconds"] = round(time.process_time() - started_cpu, 3)
    result["vllm"] = vllm.__version__
    if "id" in job:
        result["id"] = job["id"]
    return result


def read_jobs(stream):
    """The jobs of ``stream``: JSON lines, each answered as soon as it is read
    (a runner can stream a batch through one process), or one JSON document
    over several lines."""
    lines = iter(stream)
    for line in lines:
        if not line.strip():
            continue
        try:
            yield json.loads(line)
        except json.JSONDecodeError:
            yield json.loads(line + "".join(lines))
            return


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("input", nargs="?", default="-", help="a job (JSON) or jobs (JSON lines); - for stdin")
    parser.add_argument("--csv", action="store_true", help="print a replay's answer as CSV")
    parser.add_argument("--version", action="store_true", help="print the vLLM version and exit")
    args = parser.parse_args(argv)
    if args.version:
        print(vllm.__version__)
        return 0
    for job in read_jobs(sys.stdin if args.input == "-" else open(args.input)):
        result = answer(job)
        if args.csv:
            if "csv" not in result:
                print(json.dumps(result), file=sys.stderr)
                return 1
            sys.stdout.write(result["csv"])
            if result["status"] != "finished":
                print(result["status"], file=sys.stderr)
        else:
            sys.stdout.write(json.dumps(result) + "\n")
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
