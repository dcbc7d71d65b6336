"""A vLLM scheduler scenario as a serQ program, run on the small-step
semantics, answered in the recorded format (../shared/oracle/README.md).

A scenario is ``{budget, max_seqs, block_size, num_blocks, chunk?,
prefix_caching?, serve?, requests: [{prompt, out, arrive?}]}``
(``check_scenario``: what is wrong with one is located at its JSON node).
It has two programs:

- the harness's (``compile_scenario``, ``scenario_program``), which
  ``serq-ref oracle run/check`` runs and lean_bridge translates for a
  campaign case and for a scenario with prefix caching: the engine of
  examples/lib/vllm.sq (section 7 of seed 002) through
  examples/oracle/vllm_scenario.sq, with the scenario's constants set
  (``num_blocks - 1`` usable blocks: one is vLLM's null block), iteration
  cost 1 (so a time is a step), its ``serve`` key, if any, written into the
  engine (``serve by (KEY);``), and its requests as explicit sessions
  (prompt, o = out, arrive);
- the one-request program's (``request_program``): examples/oracle/
  vllm_request.sq, which has no prefix cache, with the same constants,
  serve key and sessions; the program the reference compiler compiled
  ../shared/oracle's scenarios from (its ``NAME.ir.json``,
  tests/test_lean_emit.py), which lean_bridge translates for the others and
  oracle/differential.py runs on both engines.

The vLLM rule: lib/vllm.sq follows vLLM 0.33.0; ``older_rule`` sets its
switch (``older_rule = 1``: a request that preempts itself ends the pass, the
revision seed 001 cites, docs/divergences.md D1). A scenario read from a file
takes the rule of the vLLM its corpus was recorded on (``recorded_vllm``):
../shared/oracle's answers are 0c87a197's, oracle/data's 0.33.0's.

The answer: ``first[id]``, the time of the request's first-token sample
(the library's ``ttft``); ``done[id]``, of its ``done`` sample; the kv pool's
``preemptions``; ``steps``, one more than the last iteration's end (the
driver's final step, which only flushes finished requests: the oracle's
``steps`` is "one more than the last iteration that did work"; 0 when no
request was served); ids are the requests' positions, as strings; and
``refused`` ({id: why}, only when a request was refused).

Priorities and limits (docs/design/priorities-and-limits.md): a scenario
may give ``policy`` ("fcfs", "priority"), a ``priority`` per request,
``max_model_len`` and ``watermark``. When it gives any of them, or has a
request that could never finish alone in the cache or whose prompt and
output pass max_model_len, the harness writes what
they mean into the program's AST (``_with_limits``), as it writes a serve
key: vLLM's priority queue and victim (``queue by (priority, arrival);
requeue by key;``, ``preempt by (-priority, -arrival);``), the watermark in
the admission's reservation, and each session's refusal (``refused``, a code:
``REFUSALS``) and its output length cut at max_model_len (check_stop).
Without them the program is the file's, unchanged.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import re
from pathlib import Path

from typing import Callable, NamedTuple

from oracle.ast_edit import (Items, Loaded, append_to_init, edit_session_call, insert_step_option, load_items,
                             parse_expr, parse_pool_options, parse_step_options, parse_stmts, prepend_lets,
                             parse_content, replace_hold_reserve, replace_hold_units, replace_pool_option,
                             replace_session_call, replace_step_option, set_hold_content)
from oracle import offload
from oracle.vllm_sets import engine_sets, step_clock_sets  # noqa: F401 (re-exported: the harness's names)
from semantics import ir
from semantics.errors import ProgramError, Span, UsageError
from semantics.syntax import ast
from semantics.jsonpos import nearest, positions
from semantics.textfile import read_text  # a file's UTF-8 text, its errors as a program's file's
from semantics.sourcemap import SourceMap

ROOT = Path(__file__).resolve().parent.parent
#: The harness's program of a scenario (lib/vllm.sq's engine, one request per session).
SCENARIO_PROGRAM = ROOT / "examples" / "oracle" / "vllm_scenario.sq"
LIBRARY = ROOT / "examples" / "lib" / "vllm.sq"
#: lib/vllm.sq's step stage, whose ``serve admission`` a scenario's serve key replaces.
ENGINE = "engine"
#: The one-request program (seed 002, section 7), the reference compiler's (``request_program``).
REQUEST_PROGRAM = ROOT / "examples" / "oracle" / "vllm_request.sq"
#: The one-request program's step stage: a serve key goes before its ``memory``, ``self preemption continue``
#: last.
REQUEST_ENGINE = "vllm"
#: What the harness's fragments are located at (they are no file's): the serve key's errors are the
#: scenario's, at its ``serve``.
FRAGMENT = "<oracle.scenario>"

REQUIRED = ("budget", "max_seqs", "block_size", "num_blocks", "requests")
OPTIONAL = ("chunk", "prefix_caching", "serve", "async", "policy", "max_model_len", "watermark", "spec_tokens",
            "kv_groups")
#: The drafter of speculative decoding (docs/design/speculative-decoding.md, section 8): its lookahead slots and
#: draft-slot budget per K, as vLLM 0.33.0 sets them (oracle/real/driver.py's SPEC_METHODS).
SPEC_METHODS = {"ngram": (0, 0), "draft_model": (1, 1), "parallel_draft_model": (1, None)}
OPTIONAL += ("spec_method",)
#: CPU offloading (docs/design/cpu-offloading.md, oracle/offload.py)
OPTIONAL += ("offload",)
#: A campaign case's own field (oracle/campaign.py), let through: the scenario is the rest.
CASE_FIELDS = ("kind",)
#: A scenario's numbers: natural numbers.
NUMBERS = ("budget", "max_seqs", "block_size", "num_blocks", "chunk", "max_model_len", "spec_tokens")
#: Speculative decoding (docs/design/speculative-decoding.md): the draft tokens a scenario may give (vLLM takes
#: more; the campaign and the harness stop at 8), and the longest acceptance pattern of a request.
MAX_SPEC_TOKENS = 8
MAX_ACCEPT = 8
#: A scenario without ``max_model_len`` has the recorded corpora's (the driver's default).
DEFAULT_MAX_MODEL_LEN = 8192
#: The policies of vLLM's scheduler a scenario may name (vllm/config/scheduler.py:21).
POLICIES = ("fcfs", "priority")
#: The code a refused session observes as ``refused``, and the reason the answer gives (the driver's words:
#: oracle/real/driver.py), from the scenario's numbers.
REFUSALS = {
    1: lambda d, r: (f"configuration: the KV cache of {d['num_blocks'] - 1} usable blocks of {d['block_size']} tokens "
                     f"cannot hold one request of max_model_len {_max_model_len(d)} "
                     f"({-(-_max_model_len(d) // d['block_size'])} blocks)"),
    2: lambda d, r: f"prompt: {r['prompt']} tokens, not below max_model_len {_max_model_len(d)}",
    3: lambda d, r: (f"never fits: {_lifetime(d, r)} tokens need {_fit_need(d, r)} blocks of {d['block_size']}"
                     + (f" in its {len(d['kv_groups'])} KV cache groups" if has_kv_groups(d) else "")
                     + f", the KV cache has {d['num_blocks'] - 1} usable"),
}


#: The vLLM revision seed 001 cites, which ../shared/oracle's answers were recorded on (its README: "vLLM
#: pinned at commit 0c87a197"): lib/vllm.sq's ``older_rule``.
OLDER_REVISION = "0c87a197"
#: The first release whose priority path goes on past a request that preempted itself.
CONTINUE_RELEASE = (0, 33)


def recorded_vllm(path: str) -> str | None:
    """The vLLM version (a release or a commit) whose answers the corpus of
    the scenario file ``path`` holds, from what the corpus says of itself,
    looked up in the file's directory, then its parent and grandparent: the
    nearest ``manifest.json`` with a ``vllm`` field (oracle/data/manifest.json:
    "0.33.0"), else the commit the nearest README.md says vLLM was "pinned at"
    (../shared/oracle/README.md: 0c87a197). None when nothing says (a
    scenario of one's own)."""
    directory = Path(path).resolve().parent
    for _ in range(3):
        manifest = directory / "manifest.json"
        if manifest.is_file():
            try:
                version = json.loads(manifest.read_text(encoding="utf-8")).get("vllm")
            except (OSError, UnicodeDecodeError, json.JSONDecodeError, AttributeError):
                version = None
            if isinstance(version, str):
                return version
        readme = directory / "README.md"
        if readme.is_file():
            try:
                found = re.search(r"pinned at commit ([0-9a-f]{7,40})", readme.read_text(encoding="utf-8"))
            except (OSError, UnicodeDecodeError):
                found = None
            if found:
                return found.group(1)
        if directory.parent == directory:
            break
        directory = directory.parent
    return None


def older_rule_of(version: str | None) -> bool:
    """Whether answers recorded on ``version`` follow the older self-preemption
    rule: a commit (the cited 0c87a197) or a release before 0.33.0; unknown
    (None): no, lib/vllm.sq's default is 0.33.0's."""
    if version is None:
        return False
    release = re.fullmatch(r"(\d+)\.(\d+)(\.\d+)?", version)
    if release:
        return (int(release.group(1)), int(release.group(2))) < CONTINUE_RELEASE
    return True


def check_scenario(data: object, path: str = "<scenario>", text: str | None = None) -> Callable[..., Span]:
    """Nothing if ``data`` is a scenario, else a ProgramError saying what is
    wrong, located at the offending JSON node when ``text``, the JSON text
    ``data`` was read from, is given (a scenario file: its line and column),
    else at ``path`` (a label) line 1, column 1. Returns the function from a
    key path (``at("requests", 2, "out")``) to its Span, the nearest node's
    the text has, with which both programs' builders locate a serve key that
    does not compile."""
    table = positions(text) if text is not None else {}

    def at(*key) -> Span:
        line_col = nearest(table, key)
        return Span(path, *line_col) if line_col else Span(path, 1, 1)

    if not isinstance(data, dict):
        raise ProgramError("a scenario is a JSON object {budget, max_seqs, block_size, num_blocks, requests, ...}", at())
    for key in REQUIRED:
        if key not in data:
            raise ProgramError(f"the scenario has no `{key}`", at())
    for key in data:
        if key not in REQUIRED + OPTIONAL + CASE_FIELDS:
            raise ProgramError(f"`{key}` is not a field of a scenario (fields: {', '.join(REQUIRED + OPTIONAL)})",
                               at(key))
    for key in NUMBERS:
        if key in data:
            _natural(data[key], key, at(key))
    if data["num_blocks"] < 2:
        raise ProgramError("`num_blocks` counts vLLM's null block: at least 2", at("num_blocks"))
    if "async" in data and not isinstance(data["async"], bool):
        raise ProgramError(f"`async` is true (vLLM's asynchronous scheduling) or false (synchronous, the default), "
                           f"not {json.dumps(data['async'])}", at("async"))
    if "serve" in data and not isinstance(data["serve"], str):
        raise ProgramError("`serve` is a serve-by key in serQ syntax, e.g. \"-admission\"", at("serve"))
    if "policy" in data and data["policy"] not in POLICIES:
        raise ProgramError(f"`policy` is {json.dumps(data['policy'])}: one of {', '.join(map(json.dumps, POLICIES))}",
                           at("policy"))
    if data.get("policy") == "priority" and "serve" in data:
        raise ProgramError("a scenario has a `serve` key or the priority policy, not both (the serve-by oracles "
                           "run vLLM's priority path with priorities of their own)", at("serve"))
    if spec_tokens_of(data) > MAX_SPEC_TOKENS:
        raise ProgramError(f"`spec_tokens` is {data['spec_tokens']}: at most {MAX_SPEC_TOKENS}", at("spec_tokens"))
    if "spec_method" in data:
        _check_spec_method(data, at)
    if "max_model_len" in data and data["max_model_len"] < 1:
        raise ProgramError("`max_model_len` is at least 1", at("max_model_len"))
    if (data.get("chunk") or 0) > _max_model_len(data):
        raise ProgramError(f"`chunk` {data['chunk']} is above max_model_len {_max_model_len(data)}: vLLM refuses a "
                           f"long-prefill threshold above it (vllm/config/scheduler.py:355-360)", at("chunk"))
    if "watermark" in data:
        w = data["watermark"]
        if isinstance(w, bool) or not isinstance(w, (int, float)) or not (0 <= w < 1):
            raise ProgramError(f"`watermark` is {json.dumps(w)}: a fraction of the KV cache's blocks in [0, 1) "
                               f"(vllm/config/scheduler.py:196)", at("watermark"))
    if not isinstance(data["requests"], list) or not data["requests"]:
        raise ProgramError("`requests` is a non-empty list of {prompt, out, arrive?}", at("requests"))
    for k, r in enumerate(data["requests"]):
        if not isinstance(r, dict) or "prompt" not in r or "out" not in r:
            raise ProgramError(f"request {k} is not {{prompt, out, arrive?}}", at("requests", k))
        for key in r:
            if key not in REQUEST_FIELDS:
                raise ProgramError(f"`{key}` is not a field of a request (fields: {', '.join(REQUEST_FIELDS)})",
                                   at("requests", k, key))
        if "accept" in r:
            _check_accept(data, r["accept"], k, at)
        for key in ("prompt", "out", "arrive"):
            if key in r:
                _natural(r[key], f"requests[{k}].{key}", at("requests", k, key))
        if "priority" in r:
            p = r["priority"]
            if isinstance(p, bool) or not isinstance(p, (int, float)) or not math.isfinite(p) \
                    or not float(p).is_integer():
                raise ProgramError(f"`requests[{k}].priority` is {json.dumps(p)}, not an integer", at("requests", k, "priority"))
            if data.get("policy") != "priority":
                raise ProgramError(f"request {k} has a priority and the scenario's policy is fcfs, whose queue never "
                                   f"reads it: give `\"policy\": \"priority\"`", at("requests", k, "priority"))
        if r["prompt"] < 1:
            raise ProgramError(f"request {k}'s prompt is empty (vLLM refuses an empty prompt)", at("requests", k, "prompt"))
        if r["out"] < 1:
            raise ProgramError(f"request {k}'s out is 0 (vLLM's max_tokens is at least 1)", at("requests", k, "out"))
        if "prompt_segments" in r:
            check_segments(r, k, at)
        if "remote" in r or "kv_delay" in r:
            check_remote(r, k, at)
    if "kv_groups" in data:
        check_kv_groups(data, at)
    if "offload" in data:
        offload.check_offload(data, at)
    return at


#: KV cache groups (docs/design/sliding-window.md): the kinds of group a scenario's ``kv_groups`` may list, and
#: the lists it may be (one full-attention group is what a scenario without it has).
KV_GROUP_KINDS = ("full", "sliding")
KV_GROUP_SHAPES = (("full",), ("sliding",), ("full", "sliding"))


def check_kv_groups(data: dict, at: Callable[..., Span]) -> None:
    """Nothing if the scenario's ``kv_groups`` is a list of one or two KV
    cache groups the driver builds (``{"kind": "full"}``, ``{"kind":
    "sliding", "window": W}`` with W >= 1 tokens; a sliding-window model
    alone or a full-attention group and a sliding-window group), else a
    located ProgramError."""
    groups = data["kv_groups"]
    shapes = " or ".join("[" + ", ".join(shape) + "]" for shape in KV_GROUP_SHAPES)
    if not isinstance(groups, list) or not groups:
        raise ProgramError(f"`kv_groups` is a list of KV cache groups ({shapes}), e.g. "
                           f"[{{\"kind\": \"full\"}}, {{\"kind\": \"sliding\", \"window\": 64}}]", at("kv_groups"))
    for j, group in enumerate(groups):
        where = at("kv_groups", j)
        if not isinstance(group, dict) or group.get("kind") not in KV_GROUP_KINDS:
            raise ProgramError(f"`kv_groups[{j}]` is {{\"kind\": \"full\"}} or {{\"kind\": \"sliding\", "
                               f"\"window\": W}}", where)
        fields = ("kind", "window") if group["kind"] == "sliding" else ("kind",)
        for key in group:
            if key not in fields:
                raise ProgramError(f"`{key}` is not a field of a {group['kind']} KV cache group (fields: "
                                   f"{', '.join(fields)})", at("kv_groups", j, key))
        if group["kind"] == "sliding":
            if "window" not in group:
                raise ProgramError(f"`kv_groups[{j}]` is a sliding-window group without its `window` (tokens)", where)
            _natural(group["window"], f"kv_groups[{j}].window", at("kv_groups", j, "window"))
            if group["window"] < 1:
                raise ProgramError(f"`kv_groups[{j}].window` is 0: a sliding window holds at least one token",
                                   at("kv_groups", j, "window"))
    if tuple(g["kind"] for g in groups) not in KV_GROUP_SHAPES:
        raise ProgramError(f"`kv_groups` lists {', '.join(g['kind'] for g in groups)}: the driver builds {shapes}",
                           at("kv_groups"))


def refuse_kv_groups(data: dict, at: Callable[..., Span]) -> None:
    """The located refusal of a scenario with sliding-window KV cache groups that serq-ref's model does not
    cover yet: beside speculative decoding or remote KV; answered without it, it would be another deployment's
    answer. With prefix caching the KV pool shares prefixes (lib/vllm.sq's `share prefixes when (...)`): the hit
    in every group and the window group's sparse registration (docs/design/sliding-window.md, section 1 (c))."""
    if not has_kv_groups(data):
        return
    if spec_tokens_of(data) or has_remote(data):
        raise ProgramError("serq-ref does not model sliding-window KV cache groups beside speculative decoding "
                           "or remote KV (docs/design/sliding-window.md, section 7)", at("kv_groups"))
    # The cap's clamp at max_model_len (kv_cache_interface.py:936-939) is not written into the program: it never
    # binds. The admission counts min(ceil(N / bs), cap) for a sequence of N <= max_model_len tokens
    # (kv_cache_manager.py:531-533), and the clamped cap, ceil(max_model_len / bs) + 1 blocks, is above
    # ceil(N / bs); so is the unclamped one (tests/data/sliding_window/cap_clamped_by_max_model_len.json).


def kv_group_sets(data: dict) -> dict[str, float]:
    """lib/vllm.sq's settings of a scenario's ``kv_groups``: ``sliding_window`` the window in tokens (0: one
    full group) and ``full_attention`` whether a full group is beside it."""
    if not has_kv_groups(data):
        return {}
    groups = data["kv_groups"]
    window = next(g["window"] for g in groups if g["kind"] == "sliding")
    return {"sliding_window": float(window), "full_attention": 1.0 if any(g["kind"] == "full" for g in groups) else 0.0}


def has_kv_groups(data: dict) -> bool:
    """Whether the scenario's KV cache is other than one full-attention group (``kv_groups``)."""
    groups = data.get("kv_groups")
    return groups is not None and [g.get("kind") for g in groups] != ["full"]


def _check_accept(data: dict, pattern: object, k: int, at: Callable[..., Span]) -> None:
    """A request's acceptance pattern: 1 to MAX_ACCEPT natural numbers, only with ``spec_tokens``."""
    where = at("requests", k, "accept")
    if not data.get("spec_tokens"):
        raise ProgramError(f"request {k} has an acceptance pattern and the scenario has no `spec_tokens`: nothing "
                           f"is drafted", where)
    if not isinstance(pattern, list) or not 1 <= len(pattern) <= MAX_ACCEPT:
        raise ProgramError(f"`requests[{k}].accept` is a list of 1 to {MAX_ACCEPT} natural numbers (the drafts "
                           f"accepted, by the output tokens left mod its length)", where)
    for j, a in enumerate(pattern):
        _natural(a, f"requests[{k}].accept[{j}]", at("requests", k, "accept", j))


def _check_spec_method(data: dict, at: Callable[..., Span]) -> None:
    """``spec_method``: one of SPEC_METHODS, only with ``spec_tokens``."""
    if data["spec_method"] not in SPEC_METHODS:
        raise ProgramError(f"`spec_method` is {json.dumps(data['spec_method'])}: one of "
                           f"{', '.join(map(json.dumps, SPEC_METHODS))}", at("spec_method"))
    if not spec_tokens_of(data):
        raise ProgramError("the scenario has a `spec_method` and no `spec_tokens`: nothing is drafted",
                           at("spec_method"))


def spec_slots_of(data: dict) -> tuple[int, int]:
    """The scenario's lookahead slots and draft slots per scheduled request (SPEC_METHODS): (0, 0) for n-gram,
    (K, 1) for a draft model, (K, K) for a parallel one (PARD)."""
    k = spec_tokens_of(data)
    look, slots = SPEC_METHODS[data.get("spec_method", "ngram")]
    return look * k, k if slots is None else slots * (1 if k else 0)


def spec_tokens_of(data: dict) -> int:
    """The scenario's draft tokens per decoding request and step (0: no speculative decoding)."""
    return int(data.get("spec_tokens", 0) or 0)


#: A request's fields; ``accept`` is the speculative-decoding extension (docs/design/speculative-decoding.md),
#: ``prompt_segments`` the shared-prefix one (docs/design/shared-prefixes.md), ``remote`` and ``kv_delay``
#: the KV connector's (docs/design/kv-connector.md).
REQUEST_FIELDS = ("prompt", "out", "arrive", "priority", "accept", "prompt_segments") + ("remote", "kv_delay")
#: A segment's length is below the driver's stride between keys' tokens (oracle/real/driver.py).
SEGMENT_MAX = 99_999


def check_segments(r: dict, k: int, at: Callable[..., Span]) -> None:
    """Nothing if request ``k``'s ``prompt_segments`` is a list of [KEY,
    LENGTH] (KEY a string or a natural number, LENGTH a natural number at
    least 1) whose lengths sum to at most its prompt; else a located
    ProgramError."""
    segments = r["prompt_segments"]
    where = at("requests", k, "prompt_segments")
    if not isinstance(segments, list):
        raise ProgramError(f"`requests[{k}].prompt_segments` is a list of [KEY, LENGTH]", where)
    total = 0
    for j, segment in enumerate(segments):
        here = at("requests", k, "prompt_segments", j)
        if not isinstance(segment, list) or len(segment) != 2:
            raise ProgramError(f"segment {j} of request {k} is not [KEY, LENGTH]", here)
        key, length = segment
        if not (isinstance(key, str) or (isinstance(key, int) and not isinstance(key, bool) and key >= 0)):
            raise ProgramError(f"segment {j} of request {k} has the key {json.dumps(key)}: a string or a natural "
                               f"number", at("requests", k, "prompt_segments", j, 0))
        _natural(length, f"requests[{k}].prompt_segments[{j}] length", at("requests", k, "prompt_segments", j, 1))
        if not 1 <= length <= SEGMENT_MAX:
            raise ProgramError(f"segment {j} of request {k} has {int(length)} tokens: 1 to {SEGMENT_MAX}",
                               at("requests", k, "prompt_segments", j, 1))
        total += int(length)
    if total > r["prompt"]:
        raise ProgramError(f"request {k}'s segments have {total} tokens, more than its prompt {r['prompt']}", where)


def check_remote(r: dict, k: int, at: Callable[..., Span]) -> None:
    """Nothing if request ``k``'s ``remote`` (the prompt tokens a prefill
    instance computed: a natural number at most its prompt) and ``kv_delay``
    (the steps its transfer takes: a natural number, only with ``remote``)
    are well formed (docs/design/kv-connector.md, section 2); else a located
    ProgramError."""
    if "remote" not in r:
        raise ProgramError(f"request {k} has a `kv_delay` and no `remote`: it loads nothing, so nothing is delayed",
                           at("requests", k, "kv_delay"))
    _natural(r["remote"], f"requests[{k}].remote", at("requests", k, "remote"))
    if isinstance(r.get("prompt"), (int, float)) and r["remote"] > r["prompt"]:
        raise ProgramError(f"request {k}'s remote is {r['remote']}, more than its prompt {r['prompt']}: a prefill "
                           f"instance computes the prompt's tokens, no more", at("requests", k, "remote"))
    if "kv_delay" in r:
        _natural(r["kv_delay"], f"requests[{k}].kv_delay", at("requests", k, "kv_delay"))


def has_remote(data: dict) -> bool:
    """Whether some request of the scenario gives ``remote``: the scheduler has the KV connector."""
    return any(isinstance(r, dict) and "remote" in r for r in data.get("requests") or ())


def loads(data: dict) -> bool:
    """Whether some request of the scenario loads a remote prefill (``remote`` above 0)."""
    return any(isinstance(r, dict) and r.get("remote", 0) for r in data.get("requests") or ())


#: What a scenario with remote loads may not also have (docs/design/kv-connector.md section 5.5): the scenario
#: key, and what the model of the load does not reach with it.
LOAD_REFUSALS = (("spec_tokens", "speculative decoding"), ("policy", "the priority policy"),
                 ("max_model_len", "max_model_len"), ("watermark", "the watermark"))


def refuse_remote(data: dict, at: Callable[..., Span], connector: bool = True) -> None:
    """The located refusal of what the model of the KV connector does not reach: a program without the
    library's engine (``connector`` false: every ``remote`` refused); a load (``remote`` above 0) with a
    scenario key of LOAD_REFUSALS, or a request that never fits."""
    requests = data.get("requests") or ()
    found = [i for i, r in enumerate(requests)
             if isinstance(r, dict) and "remote" in r and (r["remote"] or not connector)]
    if not found:
        return
    k = found[0]
    if not connector:
        reason = "a program without lib/vllm.sq's engine"
    else:
        reason = next((what for key, what in LOAD_REFUSALS if data.get(key)), None)
        if reason is None and has_limits(data):
            reason = "a request that never fits or passes max_model_len"
    if reason is not None:
        raise ProgramError(f"serq-ref does not model the KV connector's remote load with {reason} (issue 20 "
                           f"section 2, docs/design/kv-connector.md section 5.5): this scenario's answer would "
                           f"leave its remote prefill and transfers out", at("requests", k, "remote"))


#: The session attributes of a request's remote load (``_with_remote``).
REMOTE_ATTRS = ("remote", "kv_delay")


def _with_remote(items: Items, init: tuple[str, ...]) -> Items:
    """The scenario program with the remote loads written in (docs/design/kv-connector.md section 5.5): the
    engine's clause ``load remote (remote) after (kv_delay);`` reads each session's attributes, which the
    workload's init sets to 0 and ``_build`` gives per session."""
    items = insert_step_option(items, ENGINE, None, parse_step_options("load remote (remote) after (kv_delay);",
                                                                       FRAGMENT))
    return append_to_init(items, init, parse_stmts("set remote = 0; set kv_delay = 0;", FRAGMENT))


def beyond_the_seed(data: object) -> str | None:
    """What of the scenario ``data`` seed 002's program of vLLM cannot say,
    so that an engine with only the seed's model (pyserq) answers it
    ``unsupported`` (docs/conformance.md): prefixes shared across requests
    (seed 002 section 7: "cross-session prefix sharing (out of scope)");
    None when nothing (a scenario that is no scenario is left to the
    program's builder to locate)."""
    requests = data.get("requests") if isinstance(data, dict) else None
    if offload.beyond_the_seed(data) is not None:  # first: an offloading case shares prompts to hit the tier
        return offload.beyond_the_seed(data)
    if isinstance(requests, list) and any(isinstance(r, dict) and "prompt_segments" in r for r in requests):
        return "prefixes shared across requests (prompt_segments): seed 002's cache is a session's own"
    if isinstance(data, dict) and isinstance(data.get("kv_groups"), list) and \
            any(isinstance(g, dict) and g.get("kind") != "full" for g in data["kv_groups"]):
        return "sliding-window KV cache groups (kv_groups): seed 002's pool holds every token a hold computed"
    if isinstance(requests, list) and has_remote(data):
        return "a KV connector's remote prefill (remote): seed 002's vLLM program has no connector"
    return None


def has_segments(data: dict) -> bool:
    """Whether some request of the scenario says which tokens it shares (``prompt_segments``)."""
    return any("prompt_segments" in r for r in data["requests"])


def _max_model_len(data: dict) -> int:
    return int(data.get("max_model_len", DEFAULT_MAX_MODEL_LEN))


def _lifetime(data: dict, r: dict) -> int:
    """The tokens a request has computed when it finishes: prompt + out - 1, cut at max_model_len - 1 (check_stop)."""
    return int(min(r["prompt"] + r["out"] - 1, _max_model_len(data) - 1))


def never_fits(data: dict, r: dict) -> bool:
    """Under the recorded convention (no ``max_model_len``): the request could not finish even alone in the cache
    (its blocks counted in every KV cache group, a sliding group's at most its admission cap: the driver's
    fit_refusal)."""
    return "max_model_len" not in data and _fit_need(data, r) > data["num_blocks"] - 1


def _fit_need(data: dict, r: dict) -> int:
    """The blocks the recorded convention counts for request ``r`` alone (oracle/real/driver.py, fit_refusal)."""
    blocks = -(-_lifetime(data, r) // data["block_size"])
    if not has_kv_groups(data):
        return blocks
    return sum(blocks if g["kind"] == "full" else min(blocks, _window_cap(data, g["window"])) for g in data["kv_groups"])


def _window_cap(data: dict, window: int) -> int:
    """vLLM 0.33.0's admission cap of a sliding group of ``window`` tokens, in blocks (campaign_sliding)."""
    from oracle.campaign_sliding import admission_cap
    return admission_cap(window, data["block_size"], data["budget"], is_async(data), _max_model_len(data))


def has_limits(data: dict) -> bool:
    """Whether the scenario's program needs ``_with_limits``: it gives a policy, a limit or a watermark, or has a
    request that never fits or one whose prompt and output pass max_model_len (refused, or cut by check_stop);
    otherwise the program is the file's."""
    return any(k in data for k in ("policy", "max_model_len", "watermark")) or \
        any(never_fits(data, r) or r["prompt"] + r["out"] > _max_model_len(data) for r in data["requests"])


def _natural(value: object, what: str, where: Span) -> None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0 \
            or not float(value).is_integer():
        raise ProgramError(f"`{what}` is {json.dumps(value)}, not a natural number", where)


def scenario_program(data: dict, path: str = "<scenario>", verdicts: bool = False,
                     older_rule: bool = False, text: str | None = None) -> ir.Program:
    """The harness's program of a scenario, compiled and linked (without the
    range verdicts, which only warn: tests/test_oracle_harness.py links the
    recorded scenarios with them); ``older_rule``: lib/vllm.sq's switch;
    ``text``: the JSON text of ``data``, to locate its errors in."""
    return compile_scenario(data, path, verdicts, older_rule, text).program


class Built(NamedTuple):
    """A scenario's program, its source map, and where a key path of the
    scenario's JSON is (``check_scenario``'s locator: lean_bridge locates what
    it refuses in the serve key there)."""

    program: ir.Program
    smap: SourceMap
    at: Callable[..., Span]


def compile_scenario(data: dict, path: str = "<scenario>", verdicts: bool = False,
                     older_rule: bool = False, text: str | None = None) -> Built:
    """``scenario_program`` and its source map (lean_bridge translates the
    program and locates what it refuses with the map). The program is
    examples/oracle/vllm_scenario.sq with lib/vllm.sq, parsed once, with the
    scenario's serve key and limits written into its AST by name
    (oracle/ast_edit.py): the map's spans are those files', but for what the
    harness wrote in, which is at ``FRAGMENT``."""
    at = check_scenario(data, path, text)
    refuse_kv_groups(data, at)
    refuse_remote(data, at)
    offload.refuse_unmodelled(data, at)  # the CPU tier: lib/vllm.sq's offload_chunks (docs/design/cpu-offloading.md)
    loaded = load_items(SCENARIO_PROGRAM)
    items = loaded.items
    sets = engine_sets(data["budget"], data["max_seqs"], data["block_size"], data["num_blocks"] - 1,
                       data.get("chunk", 0) or 0, bool(data.get("prefix_caching", False)), is_async(data))
    if older_rule:
        sets["older_rule"] = 1.0
    sets.update(kv_group_sets(data))
    sets.update(offload.offload_sets(data))
    if has_remote(data):  # the KV consumer connector (docs/design/kv-connector.md): under async, defer free
        sets["kv_connector"] = 1.0
    if loads(data):  # the remote loads (docs/design/kv-connector.md section 5.5)
        items = _with_remote(items, INIT_SETS)
    if "serve" in data:
        items = replace_step_option(items, ENGINE, "serve_admission", _serve_options(data["serve"], at))
    if has_limits(data):
        items = _with_limits(items, data)
    if spec_tokens_of(data):
        sets["spec_tokens"] = float(spec_tokens_of(data))
        # the drafter's slots (SPEC_METHODS) and the model length the drafts stop short of (the driver's default
        # when the scenario gives none): docs/design/speculative-decoding.md, section 8
        sets["spec_lookahead"], sets["spec_slots"] = map(float, spec_slots_of(data))
        sets["model_len"] = float(_max_model_len(data))
        if sets["spec_lookahead"] > 0:  # vLLM allocates the lookahead with a waiting request's first tokens
            items = replace_hold_units(items, REQUEST_DEF, KV_POOL, _with_lookahead)  # the library's KV_UNITS
        items = _with_speculation(items, INIT_SETS + (("priority", "arrival") if has_limits(data) else ()))
    # KV cache groups with prefix caching, and a CPU tier (keyed by the blocks' content): lib/vllm.sq's KV pool
    # shares prefixes itself there (its `share prefixes when (...)`, switched by the sets above), so the program
    # is the one a user gets with --set sliding_window=W or offload_chunks=N (docs/design/sliding-window.md
    # section 1 (c), docs/design/cpu-offloading.md)
    if has_segments(data):
        if spec_tokens_of(data):
            raise ProgramError("a scenario with prompt_segments and `spec_tokens`: serq-ref models prefixes shared "
                               "across requests without drafts (docs/design/shared-prefixes.md)", at("spec_tokens"))
        items = _with_segments(items, data, INIT_SETS + (("priority", "arrival") if has_limits(data) else ())
                               + (REMOTE_ATTRS if loads(data) else ()))
    return _build(data, at, items, loaded, sets, verdicts)


#: The attributes of a request's acceptance pattern (``_with_speculation``): its values and its length.
ACCEPT_ATTRS = tuple(f"accept{j}" for j in range(MAX_ACCEPT))
ACCEPT_LENGTH = "accepts"


def _with_speculation(items: Items, init: tuple[str, ...]) -> Items:
    """The scenario program with speculative decoding's acceptance written in
    (docs/design/speculative-decoding.md, section 2): each session's pattern
    is attributes (``accept0``.., ``accepts`` its length, set by the workload's
    init and given per session by ``_build``), and the engine's clause reads
    the pattern's value at the output tokens left (``remaining``, the decode
    run's tokens left) mod its length."""
    # vLLM's output tokens left count to max_tokens, which max_model_len may cut short (check_stop): the run's
    # tokens left and the cut (model_len is the scenario's max_model_len: compile_scenario)
    left = "(remaining + o - max(0, min(o, model_len - prompt)))"
    index = f"({left} - accepts * floor({left} / accepts))"
    pick = ACCEPT_ATTRS[-1]
    for j in range(MAX_ACCEPT - 2, -1, -1):
        pick = f"{index} == {j} ? {ACCEPT_ATTRS[j]} : ({pick})"
    items = replace_step_option(items, ENGINE, "speculate", parse_step_options(
        f"speculate (spec_tokens) accept ({pick}) lookahead (spec_lookahead) slots (spec_slots) within (model_len);",
        FRAGMENT))
    sets = " ".join(f"set {a} = 0;" for a in ACCEPT_ATTRS) + f" set {ACCEPT_LENGTH} = 1;"
    return append_to_init(items, init, parse_stmts(sets, FRAGMENT))


#: lib/vllm.sq's admission units in kv (vllm_request's hold), which _with_lookahead extends.
KV_UNITS = "hit + min(known - hit, min(budget_left(engine), chunk))"


def _with_lookahead(units: ast.Expr) -> ast.Expr:
    """lib/vllm.sq's admission units in kv (KV_UNITS) with the lookahead slots after them, at most up to the
    model length (vLLM's allocate_slots for a waiting request, kv_cache_manager.py:549-552,
    scheduler.py:1402-1446)."""
    return parse_expr(f"{KV_UNITS} + min(spec_lookahead, max(0, model_len - ({KV_UNITS})))", FRAGMENT)
#: A sharing scenario's session attributes: segment j's key number and length (docs/design/shared-prefixes.md §6),
#: and the observation of the prefix the first admission hit (lib/vllm.sq's first_cached: the answer's ``cached``).
SEGMENT_KEY, SEGMENT_LENGTH = "seg_key", "seg_len"
FIRST_HIT = "first_hit"


def max_segments(data: dict) -> int:
    """The most segments a request of the scenario gives (the program's content clause has that many)."""
    return max(len(r.get("prompt_segments", ())) for r in data["requests"])


def segment_keys(data: dict) -> dict:
    """Each segment key of the scenario, numbered from 1 in order of first appearance (the driver's numbering,
    oracle/real/driver.py)."""
    keys: dict = {}
    for r in data["requests"]:
        for key, _ in r.get("prompt_segments", ()):
            keys.setdefault(key, len(keys) + 1)
    return keys


def _with_segments(items: Items, data: dict, init: tuple[str, ...]) -> Items:
    """The scenario program with its shared prompt heads written in (docs/design/shared-prefixes.md, section
    6): with prefix caching, the KV pool shares prefixes (lib/vllm.sq's conditional clause replaced by an
    unconditional one), ``vllm_request``'s hold says its content (each
    session's segments as attributes, ``_segment_pairs``) and its hit is capped only by vLLM's last-token
    cap (hitmax = prompt - 1, the reuse rounding it down to blocks); with or without, the prefix the first
    admission hit is observed (``first_hit``, the answer's ``cached``)."""
    n = max_segments(data)
    if data.get("prefix_caching"):
        items = replace_pool_option(items, KV_POOL, "share_prefixes", parse_pool_options("share prefixes;", FRAGMENT))
        segments = ", ".join(f"{SEGMENT_KEY}{j} : {SEGMENT_LENGTH}{j}" for j in range(n))
        content = parse_content(segments, FRAGMENT)
        items = set_hold_content(items, REQUEST_DEF, content)
    hitmax = parse_expr("prompt - 1" if data.get("prefix_caching") else "0", FRAGMENT)
    # a request that loads (docs/design/kv-connector.md section 5.5): vLLM reports the tokens its load adopted
    # as its cached ones (the prefill stats of its first admission, scheduler.py:1251-1258: local + external)
    first = "max(remote, first_cached)" if loads(data) else "first_cached"
    items = edit_session_call(items, REQUEST_DEF, 2, hitmax,
                              parse_stmts(f"observe {FIRST_HIT} = {first};", FRAGMENT))
    sets = " ".join(f"set {SEGMENT_KEY}{j} = 0; set {SEGMENT_LENGTH}{j} = 0;" for j in range(n))
    return append_to_init(items, init, parse_stmts(sets, FRAGMENT))


def _segment_pairs(slot, data: dict, r: dict) -> tuple:
    """A session's segments as its attributes (``_with_segments``): key numbers and lengths, 0 past its own."""
    keys = segment_keys(data)
    segments = list(r.get("prompt_segments", ()))
    out = []
    for j in range(max_segments(data)):
        key, length = segments[j] if j < len(segments) else (None, 0)
        out += [(slot(f"{SEGMENT_KEY}{j}"), float(keys[key]) if key is not None else 0.0),
                (slot(f"{SEGMENT_LENGTH}{j}"), float(length))]
    return tuple(out)


def is_async(data: dict) -> bool:
    """The engine a scenario asks for: ``"async": true``, vLLM 0.33.0's
    asynchronous scheduling (lib/vllm.sq's default, ``schedule ahead``);
    absent or false, the synchronous engine, which every scenario recorded
    before the field existed was answered by (oracle/data/README.md)."""
    return bool(data.get("async", False))


def _build(data: dict, at: Callable[..., Span], items: Items, loaded: Loaded, sets: dict[str, float],
           verdicts: bool) -> Built:
    """A scenario's program: ``items`` (``loaded``'s, edited for the scenario)
    compiled with ``sets``, the requests as its explicit sessions
    (prompt, o = out, arrive), linked (with the range verdicts when
    ``verdicts``); with its source map. That it does not
    compile with a serve key is the key's fault, located at the key (``at``)."""
    from semantics.compiler import compile_items
    from semantics.link import link

    try:
        program, smap = compile_items(items, loaded.file, uses=loaded.uses, sets=sets)
    except ProgramError as e:
        if "serve" in data:
            raise ProgramError(f"the scenario's serve key `{data['serve']}` does not compile: {e.message}",
                               at("serve")) from None
        raise
    slot = program.attrs.index
    # A request's place in the order requests arrive (by arrive, then position): the driver's arrival_time.
    order = sorted(range(len(data["requests"])), key=lambda i: (data["requests"][i].get("arrive", 0), i))
    arrival = {i: n + 1 for n, i in enumerate(order)}
    keyed = "priority" in program.attrs and "arrival" in program.attrs
    spec = ACCEPT_LENGTH in program.attrs
    segmented = f"{SEGMENT_LENGTH}0" in program.attrs
    remote = "kv_delay" in program.attrs and "remote" in program.attrs
    sessions = tuple(ir.SessionSpec(((slot("prompt"), float(r["prompt"])), (slot("o"), float(r["out"])),
                                     (slot("arrive"), float(r.get("arrive", 0))))
                                    + (((slot("priority"), float(r.get("priority", 0))),
                                        (slot("arrival"), float(arrival[i]))) if keyed else ())
                                    + (_accept_pairs(slot, r) if spec else ())
                                    + (_segment_pairs(slot, data, r) if segmented else ())
                                    + (((slot("remote"), float(r.get("remote", 0))),
                                        (slot("kv_delay"), float(r.get("kv_delay", 0))))
                                       if remote else ()), None)
                     for i, r in enumerate(data["requests"]))
    program = dataclasses.replace(program, arrival=ir.Sessions(sessions))
    link(program, smap, verdicts=verdicts)
    return Built(program, smap, at)


def _accept_pairs(slot, r: dict) -> tuple:
    """A session's acceptance pattern as its attributes (``_with_speculation``): default [0], every draft rejected."""
    pattern = [float(a) for a in r.get("accept", [0])]
    return tuple((slot(a), pattern[j] if j < len(pattern) else 0.0) for j, a in enumerate(ACCEPT_ATTRS)) + \
        ((slot(ACCEPT_LENGTH), float(len(pattern))),)


def request_program(data: object, path: str = "<scenario>", text: str | None = None,
                    continues: bool = False) -> Built:
    """The one-request program of a scenario without prefix caching, linked
    (with the range verdicts), and its source map: examples/oracle/vllm_request.sq with the scenario's
    engine constants (``--set``), its serve key written into the step stage,
    its requests as explicit sessions; ``continues``: with ``self preemption
    continue;`` in its step stage (vLLM 0.33.0's rule; without it, the older
    revision's, as the reference compiler compiled it). ``text``: the JSON
    text of ``data``, to locate its errors in (``check_scenario``)."""
    at = check_scenario(data, path, text)
    if has_kv_groups(data):  # the one-request program has the seed's pool (lib/vllm.sq's says groups)
        raise ProgramError("the one-request program does not model sliding-window KV cache groups "
                           "(docs/design/sliding-window.md): the harness's program (lib/vllm.sq) does",
                           at("kv_groups"))
    refuse_remote(data, at, connector=False)
    offload.refuse_offload(data, at)
    if data.get("prefix_caching"):
        raise AssertionError("a scenario with prefix caching is the harness's program (compile_scenario)")
    sets = {"bs": float(data["block_size"]), "B": float(data["budget"]), "blocks": float(data["num_blocks"]) - 1,
            "max_seqs": float(data["max_seqs"]), "chunk": float(data.get("chunk", 0))}
    loaded = load_items(REQUEST_PROGRAM)
    items = loaded.items
    if "serve" in data:
        items = insert_step_option(items, REQUEST_ENGINE, "memory", _serve_options(data["serve"], at))
    if continues:
        continues_clause = parse_step_options("self preemption continue;", FRAGMENT)
        items = insert_step_option(items, REQUEST_ENGINE, None, continues_clause)
    return _build(data, at, items, loaded, sets, verdicts=True)


def _serve_options(key: str, at: Callable[..., Span]) -> tuple[ast.Option, ...]:
    """The clause ``serve by (KEY);`` of the scenario's serve key; a key that
    does not parse is the scenario's error, at its ``serve``."""
    try:
        return parse_step_options(f"serve by ({key});", FRAGMENT)
    except ProgramError as e:
        raise ProgramError(f"the scenario's serve key `{key}` does not compile: {e.message}", at("serve")) from None


#: What _with_limits changes, by name: the request pool's ``queue fifo`` and the KV pool's ``preempt lifo``
#: (lib/vllm.sq), the reservation ``known`` of ``vllm_request``'s hold in kv, the workload's init (which sets
#: these attributes) and the session's call of ``vllm_request`` (examples/oracle/vllm_scenario.sq).
REQUEST_POOL, KV_POOL, REQUEST_DEF = "reqs", "kv", "vllm_request"
INIT_SETS = ("prompt", "o", "arrive")
REQUEST_CALL = ("prompt", "o", "0", "t0")


def _with_limits(items: Items, data: dict) -> Items:
    """The scenario program with the scenario's policy and limits written in
    (docs/design/priorities-and-limits.md): under the priority policy vLLM's
    heap and victim; the watermark's blocks added to the reservation of an
    admission while the request pool has a holder (a running request:
    kv_cache_manager.py:518-525), capped at the pool so that the hold is
    never rejected for it (it waits, as vLLM's request does, until nothing
    runs); and, in the session, the refusal (1 the cache cannot hold one
    request of max_model_len, only when the scenario gives it; 2 a prompt not
    below max_model_len; 3 under the recorded convention, a request that
    could never finish alone in the cache), observed as ``refused`` before
    the request holds anything, and the output length cut at max_model_len."""
    if data.get("policy") == "priority":
        items = replace_pool_option(items, REQUEST_POOL, "queue_fifo",
                                    parse_pool_options("queue by (priority, arrival); requeue by key;", FRAGMENT))
        items = replace_pool_option(items, KV_POOL, "preempt_lifo",
                                    parse_pool_options("preempt by (-priority, -arrival);", FRAGMENT))
    given = 1 if "max_model_len" in data else 0
    items = replace_hold_reserve(items, REQUEST_DEF, KV_POOL, "known", parse_expr(
        "min(known + (holders(reqs) > 0 ? floor(watermark * (blocks + 1)) : 0) * bs, blocks * bs)", FRAGMENT))
    items = append_to_init(items, INIT_SETS, parse_stmts("set priority = 0; set arrival = 0;", FRAGMENT))
    items = replace_session_call(items, REQUEST_DEF, REQUEST_CALL, parse_stmts(f"""
        set refusal = {given} == 1 && {_startup_blocks(data)} > blocks ? 1
                    : prompt >= max_model_len ? 2
                    : {given} == 0 && {_fit_blocks(data)} > blocks ? 3 : 0;
        branch (refusal > 0) {{
          observe refused = refusal;
          end;
        }}
        vllm_request(prompt, min(o, max_model_len - prompt), 0, t0);""", FRAGMENT))
    return prepend_lets(items, (("max_model_len", parse_expr(str(_max_model_len(data)), FRAGMENT)),
                                ("watermark", parse_expr(repr(float(data.get("watermark", 0.0))), FRAGMENT))),
                        FRAGMENT)


def _startup_blocks(data: dict) -> str:
    """The startup check's count, as lib/vllm.sq's expression, against the usable blocks (refusal 1): vLLM
    0.33.0's check_enough_kv_cache_memory (kv_cache_planning.py:151-183) asks the memory of one request of
    max_model_len in every layer, a full group's ceil(max_model_len / bs) pages and a sliding group's its admission
    cap (SlidingWindowSpec.max_memory_usage_bytes, kv_cache_interface.py:946-955, the cap clamped at
    max_model_len), of the pool's memory less one block of it, which holds a page of every layer
    (_pool_bytes_per_block, kv_cache_planning.py:251-262): with two groups one page more than the usable blocks'
    (tests/data/sliding_window/startup_counts_both_groups.json, cap_clamped_by_max_model_len.json)."""
    blocks = "ceil(max_model_len / bs)"
    if not has_kv_groups(data):
        return blocks
    groups = data["kv_groups"]
    terms = [blocks if g["kind"] == "full" else str(_window_cap(data, g["window"])) for g in groups]
    return "(" + " + ".join(terms + [str(len(groups) - 1)] * (len(groups) > 1)) + ")"


def _fit_blocks(data: dict) -> str:
    """The refusal's count of a request's blocks, as lib/vllm.sq's expression: its tokens but the last in blocks,
    in every KV cache group, a sliding group's at most its admission cap (``_fit_need``)."""
    blocks = "ceil(min(prompt + o - 1, max_model_len - 1) / bs)"
    if not has_kv_groups(data):
        return blocks
    return " + ".join(blocks if g["kind"] == "full" else f"min({blocks}, {_window_cap(data, g['window'])})"
                      for g in data["kv_groups"])


def request_key(request: str) -> tuple:
    """The order of request ids in answers and logs: ids in number order; an
    id that is no number after them, by text."""
    try:
        return (0, int(request), "")
    except ValueError:
        return (1, 0, request)


def answer_of(result, program: ir.Program, data: dict | None = None) -> dict:
    """The answer of a finished run of a scenario program, in the recorded format."""
    by_name = {o.name: o for o in result.observes}
    first = {str(serial): _step(time) for time, serial, _, _ in by_name["ttft"].samples}
    done = {str(serial): _step(time) for time, serial, _, _ in by_name["done"].samples}
    kv = next(p for p in result.pools if p.name == "kv")
    last = max((time for time, _, _, _ in by_name["done"].samples), default=0.0)
    answer = {"first": dict(sorted(first.items(), key=lambda kv_: int(kv_[0]))),
              "done": dict(sorted(done.items(), key=lambda kv_: int(kv_[0]))),
              "preemptions": kv.preemptions, "steps": _step(last) + flush_steps(program) if done else 0}
    if FIRST_HIT in by_name:  # a scenario with prompt_segments: vLLM's num_cached_tokens of each request
        hits = {serial: value for _, serial, _, value in by_name[FIRST_HIT].samples}
        answer["cached"] = {str(serial): _step(hits[serial]) for serial in sorted(hits)}
    if "refused" in by_name and by_name["refused"].samples:
        if data is None:
            raise AssertionError("a program with refusals is answered with its scenario (answer_of's data)")
        codes = {serial: int(value) for _, serial, _, value in by_name["refused"].samples}
        answer["refused"] = {str(serial): REFUSALS[code](data, data["requests"][serial])
                             for serial, code in sorted(codes.items())}
    return answer


def flush_steps(program: ir.Program) -> int:
    """The driver's steps after the last finish: synchronous, one (the step
    that flushes the finished ids); under schedule ahead two (the batch
    formed while the last token was in flight, then the flush:
    docs/design/async-scheduling.md, the step clock)."""
    ahead = any(isinstance(s.kind, ir.Step) and s.kind.schedule_ahead for s in program.stages)
    return 2 if ahead else 1


def _step(time: float) -> int | float:
    """A time on the step clock as the oracle writes it: a whole number (a time that is not one is kept, to show)."""
    return int(time) if float(time).is_integer() else time


def older_rule_for(path: str, older_rule: bool | None = None) -> bool:
    """Whether the scenario file ``path`` runs under the older rule: ``older_rule`` when given, else the
    rule of the vLLM its corpus was recorded on (``recorded_vllm``); 0.33.0's for what is no file."""
    if older_rule is None:
        return older_rule_of(recorded_vllm(path)) if os.path.isfile(path) else False
    return older_rule


def run_scenario(data: dict, path: str = "<scenario>", older_rule: bool | None = None,
                 text: str | None = None) -> dict:
    """A scenario's answer on the small-step semantics; ``older_rule`` None:
    the rule of the vLLM the file's corpus was recorded on (``recorded_vllm``);
    ``text``: the JSON text of ``data``, to locate its errors in."""
    from semantics.fast import run  # the oracle runs the fast engine (issue 22 §1); the digest holds it to the definition

    program = scenario_program(data, path, older_rule=older_rule_for(path, older_rule), text=text)
    stall = None
    if offload.has_offload(data):  # the engine steps while the CPU tier's transfers are in flight
        result, until, whole, stall = _run_offload(program, data)
    else:
        result, until, whole = run(program), 0.0, set()
    if stall is not None:  # vLLM 0.33.0's one-token livelock: the driver ends the run as stalled
        return _stalled_answer(data, result, program, whole, stall)
    if result.ended < len(data["requests"]):
        raise ProgramError(f"{path}: {len(data['requests']) - result.ended} request(s) did not finish by the horizon "
                           f"{result.horizon:g} steps", Span(path, 1, 1))
    answer = answer_of(result, program, data)
    if until and answer["done"]:  # a transfer reported after the last finish (docs/design/cpu-offloading.md)
        answer["steps"] = max(answer["steps"], _step(until))
    for serial in whole:  # a first admission that loaded the whole prompt: vLLM counts it all cached
        if str(serial) in answer.get("cached", {}):
            answer["cached"][str(serial)] += 1
    served = set(answer["done"]) | set(answer.get("refused", {}))
    missing = [str(i) for i in range(len(data["requests"])) if str(i) not in served]
    if missing:  # never an answer that leaves a request out (pool/reject: a hold that can never fit)
        raise ProgramError(f"{path}: request(s) {', '.join(missing)} neither finished nor were refused "
                           f"(rejected by a pool they can never fit)", Span(path, 1, 1))
    return answer


def _run_offload(program: ir.Program, data: dict):
    """The run of a scenario program with a CPU tier (by the definition: the fast engine has no form of it), the
    end of its engine's last iteration formed while a transfer was in flight (0: none): vLLM's engine steps
    while its offloading connector has jobs (has_pending_push_work), and the driver counts those steps; and the
    sessions whose first admission loaded their whole prompt (their hold's cached leaves out the last token,
    which it computes; vLLM reports the whole prompt as its num_cached_tokens)."""
    from semantics.smallstep.driver import build_machine, walk
    from semantics.smallstep.measure import build_result

    m = build_machine(program)
    last = None
    # the driver's stall (oracle/real/driver.py): an iteration T that scheduled nothing, after which no transfer
    # is in flight and only loads of no chunk were reported, every live session a parked load
    busy: dict[int, bool] = {}
    seen: dict[int, tuple] = {}  # stage -> (iteration number, the tier's jobs then)
    formed: dict[int, float] = {}  # iteration number -> the time it was formed
    stall = None
    for last in walk(m, every=True):
        for s, st in enumerate(last.stages):
            tier = getattr(st, "tier", None)
            if tier is None or st.iteration is None:
                continue
            n = st.iteration.number
            formed.setdefault(n, last.time)  # its step: the time it is formed at, plus one
            busy[n] = busy.get(n, False) or bool(st.iteration.assigned or st.iteration.preempted)
            before = seen.get(s)
            if before is not None and before[0] == n - 1:
                jobs = before[1]
                parked = {load.serial for load in st.loads}
                if all(j.due <= n for j in jobs) and all(j.load and not j.keys for j in jobs if j.due == n) \
                        and not busy.get(n - 1, True) and last.sessions and set(last.sessions.keys()) <= parked:
                    stall = _stall(data, build_result(m, last, last.time), int(formed[n - 1]) + 1)
                    if stall is not None:  # the driver's end: vLLM would load it for ever
                        break
            seen[s] = (n, tier.jobs)
        if stall is not None:
            break
    tiers = [st.tier for st in last.stages if getattr(st, "tier", None) is not None]
    until = max((tier.until for tier in tiers), default=0.0)
    whole = {serial for tier in tiers for serial in tier.whole}
    return build_result(m, last, last.time), until, whole, stall


def _stall(data: dict, result, t: int) -> int | None:
    """The step at which the driver ends a run of a request that loads for ever as stalled (oracle/real/driver.py:
    nothing scheduled, no finished ids, nothing to arrive, no transfer in flight and no load of some chunk
    reported: oracle/real/offload.py); None when every request finished."""
    by_name = {o.name: o for o in result.observes}
    done = [time for time, _, _, _ in by_name["done"].samples]
    arrive = max((float(r.get("arrive", 0)) for r in data["requests"]), default=0.0)
    least = max(max(done, default=-1.0) + 2, arrive)
    return t if t >= least else None


def _stalled_answer(data: dict, result, program: ir.Program, whole: set, stall: int) -> dict:
    """The answer of a run the driver ends as stalled: the finished requests' steps, ``steps`` the stall's step,
    its ``status`` and the ``unfinished`` requests (those never admitted to run: their ``cached`` left out)."""
    answer = answer_of(result, program, data)
    answer["steps"] = stall
    unfinished = [str(i) for i in range(len(data["requests"])) if str(i) not in answer["done"]]
    for serial in whole:
        if str(serial) in answer.get("cached", {}):
            answer["cached"][str(serial)] += 1
    if "cached" in answer:
        answer["cached"] = {k: v for k, v in answer["cached"].items() if k not in unfinished}
    answer["status"] = f"stalled at step {stall}: nothing schedulable and nothing to come"
    answer["unfinished"] = unfinished
    return answer


def run_ir(path: str) -> dict:
    """The answer of an IR file of the oracle program (the reference
    implementation's compiled scenario: observation 0 the first token, 1 the
    finish), in the recorded format."""
    from semantics.pipeline import load
    from semantics.fast import run

    loaded = load(path)
    result = run(loaded.program, base_dir=loaded.base_dir)
    first, done = result.observes[0], result.observes[1]
    memory = next(s.kind.memory for s in loaded.program.stages if isinstance(s.kind, ir.Step))
    last = max((time for time, _, _, _ in done.samples), default=0.0)
    return {"first": {str(serial): _step(time) for time, serial, _, _ in sorted(first.samples, key=lambda x: x[1])},
            "done": {str(serial): _step(time) for time, serial, _, _ in sorted(done.samples, key=lambda x: x[1])},
            "preemptions": result.pools[memory].preemptions, "steps": _step(last) + 1}


def read_json(path: str):
    """A JSON file's value (``read_json_text``)."""
    return read_json_text(path)[0]


def read_json_text(path: str) -> tuple[object, str]:
    """A JSON file's value and its text (to locate what is wrong in the value
    with); a file that is no UTF-8 or no JSON is a located ProgramError."""
    text = read_text(path)
    try:
        return json.loads(text), text
    except json.JSONDecodeError as e:
        raise ProgramError(f"not JSON: {e.msg}", Span(path, e.lineno, e.colno)) from None


#: A campaign case by its label: ``FILE.jsonl#INDEX`` (``oracle check``'s label, with the file's path as given).
CASE_LABEL = re.compile(r"(?P<file>.+\.jsonl)#(?P<index>\d+)")


def split_label(spec: str) -> tuple[str, int] | None:
    """``(FILE.jsonl, INDEX)`` when ``spec`` names a campaign case by its
    label, else None (a scenario file's path)."""
    found = CASE_LABEL.fullmatch(spec)
    return (found.group("file"), int(found.group("index"))) if found else None


def answer_path(path: str) -> str:
    """``DIR/NAME.out.json`` for ``DIR/NAME.json`` or ``DIR/NAME.ir.json``."""
    base = path[:-len(".ir.json")] if path.endswith(".ir.json") else path[:-len(".json")]
    return base + ".out.json"


def cases_in(directory: str) -> list[str]:
    """The files ``oracle check`` takes in ``directory``: every ``NAME.json``
    and every ``NAME.ir.json`` with a ``NAME.out.json`` beside it, by name."""
    try:
        names = sorted(os.listdir(directory))
    except OSError as e:
        raise UsageError(f"cannot list {directory}: {e.strerror}") from None
    out = []
    for name in names:
        if name.endswith(".out.json") or not name.endswith(".json"):
            continue
        stem = name[:-len(".ir.json")] if name.endswith(".ir.json") else name[:-len(".json")]
        if "." in stem:  # NAME.target.json and the like: not a scenario
            continue
        if f"{stem}.out.json" in names:
            out.append(os.path.join(directory, name))
    return out
