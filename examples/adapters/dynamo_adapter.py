"""A conformance adapter (docs/conformance.md): NVIDIA Dynamo's mocker (PyPI
ai-dynamo-runtime 1.6.1, `dynamo._core.run_mocker_trace_replay`, an offline
virtual-clock replay of its vLLM-style scheduler) answers a vLLM scenario.

    $SERQ_DYNAMO_PYTHON examples/adapters/dynamo_adapter.py SCENARIO.json

It runs in the mocker's own environment (examples/adapters/setup-dynamo.sh
builds it outside the repository) and imports nothing of serq-ref: it reads
the scenario's fields and prints the answer in the .out.json shape, or
{"unsupported": WHY} for a scenario that uses a knob the mocker lacks
(docs/conformance.md, "Unsupported"). docs/field.md has the grading.

The mapping. The scenario's engine: `budget` is the mocker's
max_num_batched_tokens, `max_seqs` its max_num_seqs, `block_size` its
block_size, `num_blocks - 1` its num_gpu_blocks (the mocker's count is of
usable blocks; vLLM's includes the null block), `prefix_caching` its
enable_prefix_caching; chunked prefill on (vLLM 0.33.0's default), the newest
request preempted first (`preemption_mode` lifo, the mocker's default).
The timing model is the mocker's `fixed` one with 1 ms for a prefill and for
a decode iteration, so that the virtual clock counts iterations: the
iteration that starts at t ms is step t + 1, a token sampled at t ms was
sampled by step t (the replay's clock starts at the first arrival: the
adapter adds that arrival back to every time it reads). Request i arrives at `arrive` ms (added after step
`arrive`: the first step that can schedule it is arrive + 1); its prompt's
blocks get hash ids of their own (no request shares a prefix with another).
The answer: `first` the request's first_token_ms, `done` its last_token_ms,
`preemptions` the readmissions, `steps` the last done + 1.

What the mocker lacks (the adapter says "unsupported" and why): a serve-by
key or a priority policy (its scheduler serves first come first served),
asynchronous scheduling, a long-prefill token threshold that can bind (one
below a request's prompt + output: vLLM caps every prefill chunk at it),
max_model_len refusals and a watermark, a block of one token (the mocker
wants two at least), and two requests the same in arrival, prompt and
output (its per-request report names a request by a random uuid: such two
cannot be told apart).

With SERQ_SCHEDULE_LOG set, the adapter writes the schedule log the
mocker's report allows: each admission (a readmission too) and each
finish, so the header says "fields": ["admitted", "finished"]. With
SERQ_DYNAMO_TELEMETRY set to a file, the mocker writes there its telemetry
sampled every 1 ms of its clock (running and waiting requests, blocks in
use, decode forwards, preemptions), one JSON object a line; the times are
the replay's own (from the first arrival).
"""
import json
import math
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # peer_knobs beside this script, under any Python
import peer_knobs  # noqa: E402

ENGINE = "NVIDIA Dynamo mocker (ai-dynamo-runtime {})"
LACKS = peer_knobs.Lacks(
    serve="the mocker's scheduler is first come first served",
    priority="the mocker's scheduler has no request priorities",
    schedule="the mocker schedules one iteration at a time",
    threshold="the mocker has",
    replay=("the adapter maps scenarios only, each request at its arrival time in a mooncake trace; the "
            "mocker's agentic trace formats (for multi-turn sessions) are not mapped"))


def unsupported(scenario: dict) -> str | None:
    """Why the mocker cannot express ``scenario`` (None: it can)."""
    why = peer_knobs.unmapped(scenario, LACKS) or peer_knobs.bounded(scenario, LACKS)
    if why is not None:
        return why
    requests = scenario["requests"]
    if scenario["block_size"] < 2:
        return "a block of one token: the mocker's vLLM backend wants block_size 2 at least"
    signatures = [(r.get("arrive", 0), r["prompt"], r["out"]) for r in requests]
    if len(set(signatures)) < len(signatures):
        return ("two requests the same in arrival, prompt and output: the mocker's per-request report "
                "names a request by a random uuid, so they cannot be told apart")
    return None


def replay(scenario: dict, workdir: str) -> list[dict]:
    """The mocker's per-request records of the scenario, one per request, in the requests' order."""
    import dynamo._core as core

    block = scenario["block_size"]
    rows, next_hash = [], 1
    for request in scenario["requests"]:
        blocks = math.ceil(request["prompt"] / block)
        rows.append({"timestamp": float(request.get("arrive", 0)), "input_length": request["prompt"],
                     "output_length": request["out"], "hash_ids": list(range(next_hash, next_hash + blocks))})
        next_hash += blocks
    trace = os.path.join(workdir, "trace.jsonl")
    with open(trace, "w", encoding="utf-8") as f:
        f.writelines(json.dumps(row) + "\n" for row in rows)
    engine = {
        "backend": "vllm",
        "block_size": block,
        "num_gpu_blocks": scenario["num_blocks"] - 1,
        "max_num_seqs": scenario["max_seqs"],
        "max_num_batched_tokens": scenario["budget"],
        "enable_prefix_caching": bool(scenario.get("prefix_caching")),
        "enable_chunked_prefill": True,
        "preemption_mode": "lifo",
        "speedup_ratio": 1.0,
        "decode_speedup_ratio": 1.0,
        "timing_model": {"type": "fixed", "prefill_ms": 1.0, "decode_ms": 1.0},
    }
    telemetry = os.environ.get("SERQ_DYNAMO_TELEMETRY")  # its 1 ms samples (docs/field.md reads them)
    result = core.run_mocker_trace_replay([trace], extra_engine_args={"engine": engine,
                                                                      "num_gpu_blocks_is_explicit": True},
                                          trace_block_size=block, capture_per_request=True,
                                          **({"capture_telemetry": True, "telemetry_sample_interval_ms": 1.0,
                                              "telemetry_jsonl_path": telemetry} if telemetry else {}))
    records = list(result.per_request)
    if len(records) != len(rows):
        raise RuntimeError(f"the mocker reported {len(records)} requests of {len(rows)}")
    # the replay's clock starts at the trace's first arrival (its times are relative to it): back on
    # the scenario's clock, every time is that much later
    offset = min(row["timestamp"] for row in rows)
    for record in records:
        for key in ("arrival_time_ms", "first_token_ms", "last_token_ms"):
            if record[key] is not None:
                record[key] += offset
        for admission in record["admission_history"]:
            admission["at_ms"] += offset
    # the records come in the order of their random uuids: a request is known by its signature
    # (unsupported() refused the scenarios where two requests share one)
    by_signature = {(r["arrival_time_ms"], r["input_length"], r["requested_output_length"]): r for r in records}
    missing = [row for row in rows
               if (row["timestamp"], row["input_length"], row["output_length"]) not in by_signature]
    if missing:
        raise RuntimeError(f"the mocker's report has no request arriving at {missing[0]['timestamp']} ms "
                           f"with {missing[0]['input_length']} prompt and {missing[0]['output_length']} output tokens")
    return [by_signature[(row["timestamp"], row["input_length"], row["output_length"])] for row in rows]


def step(ms) -> int:
    """A timestamp of the 1 ms-per-iteration clock as a step (it is on the grid, or the mapping failed)."""
    if ms is None or abs(ms - round(ms)) > 1e-6:
        raise RuntimeError(f"a timestamp off the 1 ms iteration grid: {ms}")
    return int(round(ms))


def answer(scenario: dict, log: str | None = None) -> dict:
    why = unsupported(scenario)
    if why is not None:
        return {"unsupported": why}
    with tempfile.TemporaryDirectory(prefix="dynamo-adapter-") as workdir:
        records = replay(scenario, workdir)
    first, done, preemptions = {}, {}, 0
    events: dict[int, dict[str, list[str]]] = {}
    for i, record in enumerate(records):
        preemptions += record["readmission_count"] or 0
        for admission in record["admission_history"]:
            events.setdefault(step(admission["at_ms"]) + 1, {}).setdefault("admitted", []).append(str(i))
        if record["terminal_status"] != "completed":
            continue
        first[str(i)], done[str(i)] = step(record["first_token_ms"]), step(record["last_token_ms"])
        events.setdefault(done[str(i)], {}).setdefault("finished", []).append(str(i))
    if log is not None:
        write_log(log, events)
    return {"first": first, "done": done, "preemptions": preemptions,
            "steps": max(done.values(), default=0) + 1}


def write_log(path: str, events: dict[int, dict[str, list[str]]]) -> None:
    from importlib.metadata import version

    header = {"format": "serq-schedule-log", "version": 1, "engine": ENGINE.format(version("ai-dynamo-runtime")),
              "fields": ["admitted", "finished"]}
    with open(path, "w", encoding="utf-8") as f:
        f.write(json.dumps(header) + "\n")
        for n in sorted(events):
            f.write(json.dumps({"step": n, "admitted": events[n].get("admitted", []),
                                "finished": events[n].get("finished", [])}) + "\n")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python examples/adapters/dynamo_adapter.py SCENARIO.json")
    try:
        with open(sys.argv[1], encoding="utf-8") as f:
            data = json.load(f)
        print(json.dumps(answer(data, os.environ.get("SERQ_SCHEDULE_LOG"))))
    except (OSError, ValueError, KeyError, RuntimeError) as error:
        sys.exit(f"dynamo_adapter: {sys.argv[1]}: {error}")
