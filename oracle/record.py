"""Record the real vLLM scheduler's answers under oracle/data/ (plain Python:
the answers come from oracle/real/driver.py through ``oracle.real``).

    python -m oracle.record shared             the recorded scenarios and the prefix-cache replay
    python -m oracle.record replays [--spacings 4 8 ...]
    python -m oracle.record campaign --kind scenario --count 2000 --seed 1
    python -m oracle.record campaign --kind space --count 5000 --seed 1
    python -m oracle.record campaign --kind space-all --count 6000 --seed 1 --processes 2
    python -m oracle.record campaign --kind pressure --count 2000 --seed 1 --processes 2
    python -m oracle.record coverage           campaign/coverage.json from the campaign files
    python -m oracle.record manifest           recompute every listed file's sha256
    python -m oracle.record shared-prefix --count 3000 --seed 1     prompts sharing prefixes (issue 19)
    python -m oracle.record shared-head-replays [--shared-head 1000] [--spacings 4 8 ...]
    python -m oracle.record sliding-window --count 2000 --seed 1    sliding-window and hybrid KV groups (issue 20)
    python -m oracle.record kv-connector --count 2000 --seed 1      the KV connector's decode side (issue 20)
    python -m oracle.record kv-noload --count 200    recorded preempting scenarios again with a connector that loads nothing
    python -m oracle.record cpu-offload --count 2000 --seed 1       CPU offloading (issue 20 section 3)

Each command writes its files and updates ``oracle/data/manifest.json``: per
file its sha256, size, the command that produced it, the vLLM version and
the date. Needs the vLLM environment (oracle/real.py says how it is found).
"""

from __future__ import annotations

import argparse
import datetime
import gzip
import hashlib
import io
import json
import os
import statistics
import sys
import time
from pathlib import Path

from oracle import campaign_kv, campaign_prefix, campaign_sliding, real

DATA = Path(__file__).resolve().parent / "data"
MANIFEST = DATA / "manifest.json"
SHARED = Path(os.environ.get("SERQ_SHARED", real.REPO_ROOT.parent / "shared"))

#: The full replay of issue 10: short_base.csv with section 8's engine.
FULL_TRACE = "traces/short_base.csv"
FULL_SPACINGS = (4, 8, 12, 16, 20, 22, 23, 24, 28, 32, 40)
FULL_ENGINE = {"budget": 512, "max_seqs": 64, "blocks": 8010, "block_size": 16}
#: A run that has not finished after this many steps is stopped and recorded as such.
FULL_MAX_STEPS = 2_000_000
#: The prefix-cache scenario of ../shared/oracle/prefix_cache.
CACHE_TRACE = {"spacing": 3, "budget": 64, "max_seqs": 4, "blocks": 20, "block_size": 16}

CAMPAIGN_FILES = {"scenario": "scenarios.jsonl", "replay": "replays.jsonl", "serve": "serve.jsonl",
                  "space": "space.jsonl", "priority": "priority.jsonl", "limits": "limits.jsonl",
                  "space-all": "space-all.jsonl", "pressure": "async-priority-pressure.jsonl",
                  "spec": "spec-decode.jsonl"}
CAMPAIGN_FILES["spec-edges"] = "spec-edges.jsonl"  # speculative decoding's edges (docs/design/speculative-decoding.md)

SCENARIO_NAMES = ("alone", "chunked", "hol", "longchunk", "mixed", "preempt", "seqcap")
SERVE_NAMES = ("admission", "newest_first", "newest_first_preempt", "prefill_first")


def today() -> str:
    return datetime.date.today().isoformat()


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def load_manifest() -> dict:
    if MANIFEST.exists():
        return json.loads(MANIFEST.read_text())
    return {"vllm": real.VLLM_VERSION, "files": {}}


def save_manifest(manifest: dict) -> None:
    manifest["files"] = dict(sorted(manifest["files"].items()))
    MANIFEST.write_text(json.dumps(manifest, indent=1) + "\n")


def register(manifest: dict, path: Path, produced_by: str, **extra) -> None:
    """Put ``path`` (under oracle/data) in the manifest with its checksum."""
    relative = path.relative_to(DATA).as_posix()
    manifest["files"][relative] = {
        "sha256": sha256(path),
        "bytes": path.stat().st_size,
        "produced_by": produced_by,
        "vllm": real.VLLM_VERSION,
        "date": today(),
        **extra,
    }


def write_text(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def write_gzip(path: Path, text: str) -> None:
    """gzip with no name and mtime 0, so the same text gives the same bytes."""
    path.parent.mkdir(parents=True, exist_ok=True)
    buffer = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=buffer, mtime=0) as f:
        f.write(text.encode())
    path.write_bytes(buffer.getvalue())


# ---------------------------------------------------------------------------
# The recorded answers of ../shared/oracle


def record_shared(python=None) -> None:
    manifest = load_manifest()
    command = "python -m oracle.record shared"
    jobs, outs = [], []
    for name in SCENARIO_NAMES:
        jobs.append(real.scenario_job(json.loads((SHARED / "oracle" / "vllm" / f"{name}.json").read_text())))
        outs.append(DATA / "shared" / "vllm" / f"{name}.out.json")
    for name in SERVE_NAMES:
        scenario = json.loads((SHARED / "oracle" / "serve" / f"{name}.json").read_text())
        jobs.append(real.scenario_job(scenario))
        outs.append(DATA / "shared" / "serve" / f"{name}.out.json")
        jobs.append(real.scenario_job(scenario, self_preempt_ends_pass=True))
        outs.append(DATA / "shared" / "serve" / f"{name}.older-rule.out.json")
    copy_scenarios(manifest, command)
    jobs.append(real.replay_job((SHARED / "oracle" / "prefix_cache" / "cache_trace.csv").read_text(), **CACHE_TRACE))
    outs.append(DATA / "shared" / "prefix_cache" / "cache_trace.out.csv")
    for job, out, answer in zip(jobs, outs, real.iter_answers(jobs, python)):
        if "error" in answer:
            raise SystemExit(f"{out}: {answer['error']}")
        if out.suffix == ".csv":
            write_text(out, answer["csv"])
        else:
            write_text(out, json.dumps(real.recorded_fields(answer)) + "\n")
        note = "self_preempt_ends_pass: the older rule (0c87a197), not 0.33.0's" if job.get("self_preempt_ends_pass") else None
        register(manifest, out, command, **({"note": note} if note else {}))
        print(f"{out.relative_to(DATA)}: {answer.get('status')}")
    save_manifest(manifest)


def copy_scenarios(manifest: dict, command: str) -> None:
    """The recorded scenarios themselves, byte for byte, beside their answers:
    the conformance corpus (docs/conformance.md) holds each case's engine
    configuration with its answer."""
    for group, names in (("vllm", SCENARIO_NAMES), ("serve", SERVE_NAMES)):
        for name in names:
            out = DATA / "shared" / group / f"{name}.json"
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_bytes((SHARED / "oracle" / group / f"{name}.json").read_bytes())
            register(manifest, out, command, note=f"the scenario, copied from ../shared/oracle/{group}/{name}.json")


# ---------------------------------------------------------------------------
# The full trace


def replay_summary(answer: dict) -> dict:
    rows = answer["rows"]
    finished = [r for r in rows if r[4] is not None]
    with_first = [r for r in rows if r[3] is not None]
    return {
        "status": answer["status"],
        "steps": answer["steps"],
        "clock": answer["clock"],
        "requests_sent": len(rows),
        "requests_finished": len(finished),
        "unfinished": answer["unfinished"],
        "never_sent": answer["never_sent"],
        "mean_ttft_steps": statistics.fmean(r[3] - r[2] for r in with_first) if with_first else None,
        "cached_tokens": sum(r[6] or 0 for r in rows),
        "prompt_tokens": sum(r[5] for r in rows),
        "seconds": answer["seconds"],
        "cpu_seconds": answer["cpu_seconds"],
    }


def record_replays(spacings, python=None, max_steps=FULL_MAX_STEPS, asynchronous: bool = False) -> None:
    """The full trace at ``spacings``: replay/short_base-sNN.csv.gz and
    replay/summary.json (the synchronous engine), or with ``asynchronous``
    (vLLM 0.33.0's default engine) replay/async-short_base-sNN.csv.gz and
    replay/async-summary.json."""
    trace = (SHARED / FULL_TRACE).read_text()
    command = "python -m oracle.record replays --spacings " + " ".join(str(s) for s in spacings)
    command += " --async" if asynchronous else ""
    prefix = "async-" if asynchronous else ""
    extra = {"async": True} if asynchronous else {}
    jobs = [
        real.replay_job(trace, spacing=spacing, max_steps=max_steps, id=f"s{spacing:02d}", **FULL_ENGINE, **extra)
        for spacing in spacings
    ]
    summary_path = DATA / "replay" / f"{prefix}summary.json"
    summary = json.loads(summary_path.read_text()) if summary_path.exists() else {}
    for spacing, answer in zip(spacings, real.iter_answers(jobs, python)):
        if "error" in answer:
            raise SystemExit(f"spacing {spacing}: {answer['error']}")
        out = DATA / "replay" / f"{prefix}short_base-s{spacing:02d}.csv.gz"
        write_gzip(out, answer["csv"])
        entry = replay_summary(answer)
        summary[f"{spacing:02d}"] = {"spacing": spacing, **FULL_ENGINE, "max_steps": max_steps, **entry}
        write_text(summary_path, json.dumps(dict(sorted(summary.items())), indent=1) + "\n")
        manifest = load_manifest()
        register(manifest, out, command, trace=f"../shared/{FULL_TRACE}", spacing=spacing, **FULL_ENGINE,
                 status=entry["status"], steps=entry["steps"], **extra)
        register(manifest, summary_path, command)
        save_manifest(manifest)
        print(f"spacing {spacing}: {entry['status']}, {entry['steps']} steps, "
              f"{entry['requests_finished']}/{entry['requests_sent']} finished, "
              f"{answer['seconds']:.0f} s ({answer['cpu_seconds']:.0f} s CPU)", flush=True)


# ---------------------------------------------------------------------------
# The campaign


def record_campaign(kind: str, count: int, seed: int, python=None, hours: float | None = None,
                    append: bool = False, asynchronous: bool = False, processes: int = 1) -> None:
    """Draw ``count`` cases of ``kind`` from ``seed`` and record each with its
    real answer, one JSON line per case: {"seed", "index", "case", "answer"}
    (serve cases also "answer_older_rule": the same case with a running
    request that preempts itself ending the pass, as before 0.33.0).
    With ``hours`` it stops after that long and says how many it recorded.
    ``asynchronous``: every case says ``"async": true`` (vLLM 0.33.0's
    default engine), written to campaign/async-NAME.jsonl. ``processes``:
    that many driver processes, case k answered by process k % processes
    (the file is the same, in case order)."""
    from oracle import campaign_cases, campaign_space

    out = DATA / "campaign" / (("async-" if asynchronous else "") + CAMPAIGN_FILES[kind])
    out.parent.mkdir(parents=True, exist_ok=True)
    draw = {"scenario": campaign_cases.scenario, "replay": campaign_cases.replay,
            "serve": campaign_cases.serve_scenario, "space": campaign_space.scenario,
            "priority": campaign_cases.priority_scenario, "limits": campaign_cases.limits_scenario,
            "space-all": campaign_space.scenario_all, "pressure": campaign_space.scenario_pressure,
            "spec": campaign_cases.spec_scenario, "spec-edges": campaign_cases.spec_edges_scenario}[kind]
    cases = [draw(seed, index) for index in range(count)]
    if asynchronous:
        cases = [{**case, "async": True} for case in cases]
    jobs = [campaign_cases.as_job(case) for case in cases]
    if kind == "serve":
        # each case twice: vLLM 0.33.0's rule, then the older one
        jobs = [job for case in jobs for job in (case, {**case, "self_preempt_ends_pass": True})]
    keep = ("first", "done", "preemptions", "steps", "status", "unfinished", "features") if kind != "replay" else (
        "rows", "status", "steps", "unfinished", "never_sent", "features")
    if processes > 1 and kind == "serve":
        raise SystemExit("--processes: serve cases are two jobs each; record them with one process")
    streams = [real.iter_answers(jobs[k::processes], python) for k in range(processes)]
    answers = (next(streams[k % processes]) for k in range(len(jobs)))
    started = time.perf_counter()
    recorded = 0
    with out.open("a" if append else "w") as f:
        for index, case in enumerate(cases):
            answer = next(answers)
            if "error" in answer:
                raise SystemExit(f"{kind} {seed}/{index}: {answer['error']}")
            record = {"seed": seed, "index": index, "case": case, "answer": {k: answer[k] for k in keep}}
            if answer.get("refused"):  # which requests were refused and why (priority/limits cases)
                record["answer"]["refused"] = answer["refused"]
            if kind in ("space-all", "pressure", "spec", "spec-edges"):  # the engine that answered, as the driver says it (the case asked for it)
                record["answer"]["mode"] = "async" if answer.get("async") else "sync"
            if kind == "spec-edges":  # the drafter's lookahead and draft slots as vLLM set them (driver.SPEC_METHODS)
                record["answer"]["spec_lookahead"] = answer.get("spec_lookahead", 0)
                record["answer"]["spec_draft_slots"] = answer.get("spec_draft_slots", 0)
            if kind == "serve":
                older = next(answers)
                if "error" in older:
                    raise SystemExit(f"{kind} {seed}/{index} (older rule): {older['error']}")
                record["answer_older_rule"] = {k: older[k] for k in keep}
            f.write(json.dumps(record, separators=(",", ":")) + "\n")
            recorded += 1
            if hours is not None and time.perf_counter() - started > hours * 3600:
                for stream in streams:
                    stream.close()
                break
    elapsed = time.perf_counter() - started
    manifest = load_manifest()
    register(manifest, out, f"python -m oracle.record campaign --kind {kind} --count {count} --seed {seed}"
             + (" --async" if asynchronous else "") + (f" --processes {processes}" if processes > 1 else ""),
             generator="oracle/campaign_space.py" if kind.startswith("space") or kind == "pressure" else "oracle/campaign_cases.py",
             seed=seed, cases=sum(1 for _ in out.open()), seconds=round(elapsed, 1),
             **({"processes": processes} if processes > 1 else {}), **({"async": True} if asynchronous else {}))
    save_manifest(manifest)
    print(f"{out.relative_to(DATA)}: {recorded} {kind}s in {elapsed:.0f} s")


def record_coverage() -> None:
    """campaign/coverage.json: per campaign file, how many cases exercised
    each feature the driver counts, and how long recording took."""
    manifest = load_manifest()
    coverage = {}
    for kind, name in [*CAMPAIGN_FILES.items(), *((k, "async-" + n) for k, n in CAMPAIGN_FILES.items())]:
        path = DATA / "campaign" / name
        if not path.exists():
            continue
        records = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        features = [r["answer"]["features"] for r in records]
        entry = {
            "cases": len(records),
            "finished": sum(r["answer"]["status"] == "finished" for r in records),
            "with_preemptions": sum(f["preemptions"] > 0 for f in features),
            "with_self_preemptions": sum(f["self_preemptions"] > 0 for f in features),
            "with_head_of_line_blocking": sum(f["blocked_steps"] > 0 for f in features),
            "preemptions": sum(f["preemptions"] for f in features),
            "recording_seconds": manifest["files"].get(f"campaign/{name}", {}).get("seconds"),
        }
        if kind in ("scenario", "serve", "space", "priority", "limits", "space-all", "pressure"):
            cases = [r["case"] for r in records]
            entry["with_prefix_caching"] = sum(bool(c.get("prefix_caching")) for c in cases)
            entry["with_chunk_cap"] = sum(bool(c.get("chunk")) for c in cases)
            entry["requests"] = sum(len(c["requests"]) for c in cases)
        if kind == "replay":
            entry["with_a_prefix_hit"] = sum(any(row[6] for row in r["answer"]["rows"]) for r in records)
            entry["with_forced_misses"] = sum(",1\n" in r["case"]["trace"] for r in records)
            entry["requests"] = sum(len(r["answer"]["rows"]) for r in records)
        if kind == "serve":
            entry["differ_from_older_rule"] = sum(
                {k: r["answer"][k] for k in ("first", "done", "preemptions", "steps")}
                != {k: r["answer_older_rule"][k] for k in ("first", "done", "preemptions", "steps")}
                for r in records
            )
        if kind in ("space-all", "pressure"):
            entry["async"] = sum(bool(c.get("async")) for c in cases)
            entry["with_priorities"] = sum(c.get("policy") == "priority" for c in cases)
            entry["async_with_priorities"] = sum(bool(c.get("async")) and c.get("policy") == "priority"
                                                 for c in cases)
            entry["async_with_priorities_and_preemptions"] = sum(
                bool(c.get("async")) and c.get("policy") == "priority" and f["preemptions"] > 0
                for c, f in zip(cases, features))
        if kind in ("priority", "space-all", "pressure"):
            cases = [c for c in cases if c.get("policy") == "priority"]
            entry["with_priority_ties"] = sum(len({q["priority"] for q in c["requests"]}) < len(c["requests"])
                                              for c in cases)
            entry["with_negative_priorities"] = sum(any(q["priority"] < 0 for q in c["requests"]) for c in cases)
            entry["with_all_distinct_priorities"] = sum(
                len(c["requests"]) > 1 and len({q["priority"] for q in c["requests"]}) == len(c["requests"])
                for c in cases)
        if kind in ("limits", "space-all"):
            cases = [r["case"] for r in records]
            refusals = [r["answer"].get("refused", {}) for r in records]
            entry["with_max_model_len"] = sum("max_model_len" in c for c in cases)
            entry["with_watermark"] = sum(bool(c.get("watermark")) for c in cases)
            for reason in ("configuration", "prompt", "never fits"):
                entry[f"refused_{reason.replace(' ', '_')}"] = sum(
                    any(why.startswith(reason + ":") for why in refused.values()) for refused in refusals)
            entry["ended_at_max_model_len"] = sum(
                any(q["prompt"] + q["out"] > c["max_model_len"] > q["prompt"] for q in c["requests"])
                for c in cases if "max_model_len" in c)
        coverage[name] = entry
    out = DATA / "campaign" / "coverage.json"
    write_text(out, json.dumps(coverage, indent=1) + "\n")
    register(manifest, out, "python -m oracle.record coverage")
    save_manifest(manifest)
    print(json.dumps(coverage, indent=1))


def refresh_manifest() -> None:
    manifest = load_manifest()
    for relative, entry in manifest["files"].items():
        path = DATA / relative
        entry["sha256"] = sha256(path)
        entry["bytes"] = path.stat().st_size
    save_manifest(manifest)



# ---------------------------------------------------------------------------
# Prefixes shared across requests (issue 19 section 1; the cases: oracle/campaign_prefix.py)


def lines_before(out: Path, start: int, seed: int) -> tuple[str, ...]:
    """The corpus ``out``'s first ``start`` lines, all of ``seed``, which a recording that goes on from case
    ``start`` keeps (the draws and the answers are deterministic: recording in parts gives the file of one
    run); a file with fewer, or with a case of another seed among them, stops it."""
    before = [line for line in out.read_text().splitlines() if line.strip()][:start] if start else []
    if len(before) != start:
        raise SystemExit(f"{out.name} has {len(before)} cases: cannot go on from case {start}")
    if any(json.loads(line)["seed"] != seed for line in before):
        raise SystemExit(f"{out.name}: a case of another seed before case {start}")
    return tuple(before)


def record_in_parts(generator, name: str, keep: tuple[str, ...], count: int, seed: int, python=None,
                    processes: int = 1, start: int = 0) -> None:
    """Record cases ``start`` .. ``count - 1`` of ``seed`` drawn by the module ``generator`` (its
    ``scenario`` and ``CORPUS``) with the real scheduler's answers (the fields ``keep``) in
    oracle/data/campaign/CORPUS, after the cases before ``start`` already there (``lines_before``), and
    register the file in the manifest as ``python -m oracle.record NAME``'s."""
    out = DATA / "campaign" / generator.CORPUS
    before = lines_before(out, start, seed)
    cases = [generator.scenario(seed, index) for index in range(start, count)]
    elapsed = write_answered(out, name, cases, seed, start, keep, python, processes, before=before)
    manifest = load_manifest()
    register(manifest, out, f"python -m oracle.record {name} --count {count} --seed {seed}"
             + (f" --processes {processes}" if processes > 1 else ""),
             generator=f"oracle/{generator.__name__.rsplit('.', 1)[-1]}.py", seed=seed,
             cases=sum(1 for _ in out.open()))
    save_manifest(manifest)
    print(f"campaign/{generator.CORPUS}: cases {start}-{count - 1} in {elapsed:.0f} s")


def write_answered(out: Path, name: str, cases: list[dict], seed: int, start: int, keep: tuple[str, ...],
                   python=None, processes: int = 1, before: tuple[str, ...] = (), append: bool = False,
                   with_mode: bool = False) -> float:
    """Ask the real scheduler for ``cases`` (cases ``start`` .. of ``seed``) on ``processes`` driver processes
    and write each as a corpus line {seed, index, case, answer: the ``keep`` fields (and the mode when
    ``with_mode``)}, after the lines ``before`` (or after the file's own lines when ``append``); a case the
    driver answers with an error stops the recording, named ``name`` seed/index. Returns the seconds taken."""
    streams = [real.iter_answers(cases[k::processes], python) for k in range(processes)]
    answers = (next(streams[k % processes]) for k in range(len(cases)))
    started = time.perf_counter()
    with out.open("a" if append else "w") as f:
        for line in before:
            f.write(line + "\n")
        for index, case in enumerate(cases, start=start):
            answer = next(answers)
            if "error" in answer:
                raise SystemExit(f"{name} {seed}/{index}: {answer['error']}")
            kept = {k: answer[k] for k in keep if k in answer}
            if with_mode:
                kept["mode"] = "async" if answer.get("async") else "sync"
            f.write(json.dumps({"seed": seed, "index": index, "case": case, "answer": kept},
                               separators=(",", ":")) + "\n")
            f.flush()
    return time.perf_counter() - started


#: The answer's fields the shared-prefix corpus keeps.
SHARED_PREFIX_KEEP = ("first", "done", "preemptions", "steps", "cached", "status", "unfinished", "features")


def record_shared_prefix(count: int, seed: int, python=None, processes: int = 1, start: int = 0,
                         append: bool = False) -> None:
    """Record cases ``start`` .. ``count - 1`` of ``seed`` with the real
    scheduler's answers in oracle/data/campaign/shared-prefix.jsonl (and the
    manifest)."""
    out = DATA / "campaign" / campaign_prefix.CORPUS
    cases = [campaign_prefix.scenario(seed, index) for index in range(start, count)]
    elapsed = write_answered(out, "shared-prefix", cases, seed, start, SHARED_PREFIX_KEEP, python, processes,
                             append=append)
    manifest = load_manifest()
    register(manifest, out, f"python -m oracle.record shared-prefix --count {count} --seed {seed}"
             + (f" --processes {processes}" if processes > 1 else ""),
             generator="oracle/campaign_prefix.py", seed=seed, cases=sum(1 for _ in out.open()),
             seconds=round(elapsed, 1))
    save_manifest(manifest)
    print(f"campaign/{campaign_prefix.CORPUS}: {count - start} cases in {elapsed:.0f} s")


#: The answer's fields the KV-connector corpus keeps.
KV_CONNECTOR_KEEP = ("first", "done", "preemptions", "steps", "transfers", "cached", "status", "unfinished",
                     "features")


def record_kv_connector(count: int, seed: int, python=None, processes: int = 1, start: int = 0) -> None:
    """Record cases ``start`` .. ``count - 1`` of ``seed`` (oracle/campaign_kv.py) with the real
    scheduler's answers in oracle/data/campaign/kv-connector.jsonl, appended to the cases before
    ``start`` already there (the draws and the answers are deterministic, so recording in parts gives
    the file of one run), and register the file in the manifest."""
    record_in_parts(campaign_kv, "kv-connector", KV_CONNECTOR_KEEP, count, seed, python, processes, start)


#: The connector that loads nothing: the corpus it is drawn from, and its file.
KV_NOLOAD_SOURCES = ("scenarios.jsonl", "async-scenarios.jsonl")
KV_NOLOAD = "kv-connector-noload.jsonl"


def record_kv_noload(count: int, python=None) -> None:
    """The first ``count`` cases with a preemption of each of KV_NOLOAD_SOURCES, every request given
    ``remote: 0`` (the scheduler has the KV connector, which loads nothing: docs/design/kv-connector.md),
    answered again by the real scheduler: oracle/data/campaign/kv-connector-noload.jsonl, one line per
    case with its ``source`` (file and index), the case and the answer."""
    out = DATA / "campaign" / KV_NOLOAD
    picked = []
    for name in KV_NOLOAD_SOURCES:
        taken = 0
        for line in (DATA / "campaign" / name).read_text().splitlines():
            record = json.loads(line)
            if taken == count:
                break
            if record["answer"]["preemptions"] > 0:
                case = dict(record["case"])
                case["requests"] = [{**r, "remote": 0} for r in case["requests"]]
                picked.append(({"file": name, "index": record["index"]}, case))
                taken += 1
    started = time.perf_counter()
    with out.open("w") as f:
        for (source, case), answer in zip(picked, real.iter_answers([c for _, c in picked], python)):
            if "error" in answer:
                raise SystemExit(f"kv-noload {source}: {answer['error']}")
            kept = {k: answer[k] for k in KV_CONNECTOR_KEEP if k in answer}
            f.write(json.dumps({"source": source, "case": case, "answer": kept}, separators=(",", ":")) + "\n")
    elapsed = time.perf_counter() - started
    manifest = load_manifest()
    register(manifest, out, f"python -m oracle.record kv-noload --count {count}", cases=len(picked),
             sources=list(KV_NOLOAD_SOURCES))
    save_manifest(manifest)
    print(f"campaign/{KV_NOLOAD}: {len(picked)} cases in {elapsed:.0f} s")


#: The shared-system-prompt replay: the full trace (333 sessions) with one head of this many tokens
#: shared by every session (every session's first turn has 2 004 prompt tokens), at the full replay's
#: eleven spacings, vLLM 0.33.0's synchronous engine and section 8's engine (oracle/record.py).
SHARED_HEAD = 1000


def record_shared_head_replays(spacings, head: int = SHARED_HEAD, python=None) -> None:
    """The full trace with a shared system prompt of ``head`` tokens at
    ``spacings``: replay/shared-head-short_base-sNN.csv.gz and
    replay/shared-head-summary.json, answered by the real scheduler."""
    trace = (SHARED / FULL_TRACE).read_text()
    command = (f"python -m oracle.record shared-head-replays --shared-head {head} --spacings "
               + " ".join(str(x) for x in spacings))
    jobs = [real.replay_job(trace, spacing=spacing, max_steps=FULL_MAX_STEPS, id=f"s{spacing:02d}",
                            shared_head=head, **FULL_ENGINE) for spacing in spacings]
    summary_path = DATA / "replay" / "shared-head-summary.json"
    summary = json.loads(summary_path.read_text()) if summary_path.exists() else {}
    for spacing, answer in zip(spacings, real.iter_answers(jobs, python)):
        if "error" in answer:
            raise SystemExit(f"spacing {spacing}: {answer['error']}")
        out = DATA / "replay" / f"shared-head-short_base-s{spacing:02d}.csv.gz"
        write_gzip(out, answer["csv"])
        entry = replay_summary(answer)
        summary[f"{spacing:02d}"] = {"spacing": spacing, "shared_head": head, **FULL_ENGINE,
                                     "max_steps": FULL_MAX_STEPS, **entry}
        write_text(summary_path, json.dumps(dict(sorted(summary.items())), indent=1) + "\n")
        manifest = load_manifest()
        register(manifest, out, command, trace=f"../shared/{FULL_TRACE}", spacing=spacing, shared_head=head,
                 **FULL_ENGINE, status=entry["status"], steps=entry["steps"])
        register(manifest, summary_path, command)
        save_manifest(manifest)
        print(f"spacing {spacing}: {entry['status']}, {entry['steps']} steps, "
              f"{entry['requests_finished']}/{entry['requests_sent']} finished, {entry['cached_tokens']} of "
              f"{entry['prompt_tokens']} prompt tokens cached, {answer['seconds']:.0f} s", flush=True)


#: What a sliding-window case's record keeps of the driver's answer (``cached`` when its requests share a
#: system prompt, ``refused`` when the driver refused one), and the engine that answered as ``mode``.
SLIDING_WINDOW_KEEP = ("first", "done", "preemptions", "steps", "cached", "refused", "status", "unfinished",
                       "features", "kv_groups")


def record_sliding_window(count: int, seed: int, python=None, processes: int = 1, start: int = 0,
                          append: bool = False) -> None:
    """Record cases ``start`` .. ``count - 1`` of ``seed`` (oracle/campaign_sliding.py) with the real
    scheduler's answers in oracle/data/campaign/sliding-window.jsonl (and the manifest)."""
    out = DATA / "campaign" / campaign_sliding.CORPUS
    cases = [campaign_sliding.scenario(seed, index) for index in range(start, count)]
    elapsed = write_answered(out, "sliding-window", cases, seed, start, SLIDING_WINDOW_KEEP, python, processes,
                             append=append, with_mode=True)
    manifest = load_manifest()
    register(manifest, out, f"python -m oracle.record sliding-window --count {count} --seed {seed}"
             + (f" --processes {processes}" if processes > 1 else "") + (f" --start {start}" if start else ""),
             generator="oracle/campaign_sliding.py", seed=seed, cases=sum(1 for _ in out.open()),
             seconds=round(elapsed, 1), **({"processes": processes} if processes > 1 else {}))
    save_manifest(manifest)
    print(f"campaign/{campaign_sliding.CORPUS}: {count - start} cases in {elapsed:.0f} s")


# ---------------------------------------------------------------------------
# CPU offloading (issue 20 section 3; the cases: oracle/campaign_offload.py)

#: The answer's fields the CPU-offloading corpus keeps.
CPU_OFFLOAD_KEEP = ("first", "done", "preemptions", "steps", "offload", "cached", "status", "unfinished",
                    "features")


def record_cpu_offload(count: int, seed: int, python=None, processes: int = 1, start: int = 0) -> None:
    """Record cases ``start`` .. ``count - 1`` of ``seed`` (oracle/campaign_offload.py) with the real
    scheduler's answers in oracle/data/campaign/cpu-offload.jsonl, after the cases before ``start``
    already there (the draws and the answers are deterministic: recording in parts gives the file of one
    run), and register the file in the manifest."""
    from oracle import campaign_offload

    record_in_parts(campaign_offload, "cpu-offload", CPU_OFFLOAD_KEEP, count, seed, python, processes, start)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m oracle.record", description=__doc__.split("\n\n")[0])
    parser.add_argument("--vllm-python")
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("shared")
    replays = commands.add_parser("replays")
    replays.add_argument("--spacings", type=int, nargs="+", default=list(FULL_SPACINGS))
    replays.add_argument("--max-steps", type=int, default=FULL_MAX_STEPS)
    replays.add_argument("--async", dest="asynchronous", action="store_true",
                         help="vLLM 0.33.0's asynchronous scheduling (replay/async-*)")
    campaign = commands.add_parser("campaign")
    campaign.add_argument("--kind", choices=tuple(CAMPAIGN_FILES), required=True)
    campaign.add_argument("--count", type=int, required=True)
    campaign.add_argument("--seed", type=int, default=1)
    campaign.add_argument("--hours", type=float)
    campaign.add_argument("--processes", type=int, default=1, help="driver processes (case k on process k %% N)")
    campaign.add_argument("--async", dest="asynchronous", action="store_true",
                          help="every case with \"async\": true (campaign/async-NAME.jsonl)")
    commands.add_parser("coverage")
    commands.add_parser("manifest")
    # prefixes shared across requests (issue 19 section 1): oracle/campaign_prefix.py records them
    prefix = commands.add_parser("shared-prefix", help="campaign/shared-prefix.jsonl (oracle/campaign_prefix.py)")
    prefix.add_argument("--count", type=int, required=True)
    prefix.add_argument("--seed", type=int, default=1)
    prefix.add_argument("--processes", type=int, default=1)
    head = commands.add_parser("shared-head-replays",
                               help="the full trace with a shared system prompt (replay/shared-head-*)")
    head.add_argument("--shared-head", type=int, default=SHARED_HEAD)
    head.add_argument("--spacings", type=int, nargs="+", default=list(FULL_SPACINGS))
    sliding = commands.add_parser("sliding-window",
                                  help="campaign/sliding-window.jsonl (oracle/campaign_sliding.py)")
    sliding.add_argument("--count", type=int, required=True)
    sliding.add_argument("--seed", type=int, default=1)
    sliding.add_argument("--processes", type=int, default=1)
    sliding.add_argument("--start", type=int, default=0,
                         help="append cases START .. COUNT - 1 to the corpus (a recording resumed)")
    kv = commands.add_parser("kv-connector", help="campaign/kv-connector.jsonl (oracle/campaign_kv.py)")
    kv.add_argument("--count", type=int, required=True)
    kv.add_argument("--seed", type=int, default=1)
    kv.add_argument("--processes", type=int, default=1)
    kv.add_argument("--start", type=int, default=0, help="go on from this case (the file's cases before it kept)")
    noload = commands.add_parser("kv-noload", help="campaign/kv-connector-noload.jsonl: a connector that loads nothing")
    noload.add_argument("--count", type=int, default=200, help="preempting cases of each source corpus")
    offload = commands.add_parser("cpu-offload", help="campaign/cpu-offload.jsonl (oracle/campaign_offload.py)")
    offload.add_argument("--count", type=int, required=True)
    offload.add_argument("--seed", type=int, default=1)
    offload.add_argument("--processes", type=int, default=1)
    offload.add_argument("--start", type=int, default=0, help="go on from this case (the file's cases before it kept)")
    args = parser.parse_args(argv)
    try:
        if args.command == "cpu-offload":
            record_cpu_offload(args.count, args.seed, args.vllm_python, args.processes, args.start)
            return 0
        if args.command == "sliding-window":
            record_sliding_window(args.count, args.seed, args.vllm_python, args.processes, args.start,
                                  append=args.start > 0)
        elif args.command == "kv-noload":
            record_kv_noload(args.count, args.vllm_python)
        elif args.command == "kv-connector":
            record_kv_connector(args.count, args.seed, args.vllm_python, args.processes, args.start)
        elif args.command == "shared-prefix":
            record_shared_prefix(args.count, args.seed, args.vllm_python, args.processes)
        elif args.command == "shared-head-replays":
            record_shared_head_replays(args.spacings, args.shared_head, args.vllm_python)
        elif args.command == "shared":
            record_shared(args.vllm_python)
        elif args.command == "replays":
            record_replays(args.spacings, args.vllm_python, args.max_steps, args.asynchronous)
        elif args.command == "campaign":
            record_campaign(args.kind, args.count, args.seed, args.vllm_python, args.hours,
                            asynchronous=args.asynchronous, processes=args.processes)
        elif args.command == "coverage":
            record_coverage()
        else:
            refresh_manifest()
    except real.RealVllmMissing as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
