"""What each region of the whole-space campaigns exercises (issue 18, §4).

    python -m oracle.space_coverage [--out docs/data/space_coverage.json] [--workers N]

For every case of the three whole-space corpora (``CORPORA``: space.jsonl,
synchronous FCFS; space-all.jsonl, both modes, both policies and the
limits; async-priority-pressure.jsonl, asynchronous priority cases under
memory pressure; drawn by oracle/campaign_space.py, which gives each case's
regions again from its seed and index): the rules of serq-ref's step engine
that applied while the harness's program ran the case (the small-step
semantics with an observer, as ``serq-ref trace --coverage`` counts them; on
every fifth case, ``EVERY``), with three variants told apart (``VARIANTS``: a victim
chosen by keys, vLLM's priority victim, by pool/preempt and by
step/preempt-parked; a request that preempts itself) and whether the
requeue key decided (``REQUEUE_DECIDES``: the answer changes when a
preempted request re-enters at the head of the queue instead of by its
keys), and the features of
the case's answer: those the real scheduler counted (oracle/real/driver.py's
``features``: preempt_steps, preemptions, self_preemptions, blocked_steps)
and those the answer and the case say (``ANSWER_FEATURES``: a request
refused, by each reason; a request ended at max_model_len). Written per
corpus, knob and region: the cases of the region, how many of them had each
feature, and of those whose rules were counted how many applied each rule
at least once. Rules no case of a region applied are listed under
``never``; the cases (indices) that applied step/preempt-parked and those
the requeue key decided, under ``listed`` (``LISTED``). No times or dates:
the same bytes for the same code and corpora.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from . import campaign_space

ROOT = Path(__file__).resolve().parent.parent
CAMPAIGN = Path("oracle/data/campaign")
#: The whole-space corpora and the kind (oracle/campaign.py) each was drawn as.
CORPORA = {"space.jsonl": "space", "space-all.jsonl": "space-all", "async-priority-pressure.jsonl": "pressure"}
OUT = Path("docs/data/space_coverage.json")
#: The real scheduler's counts (oracle/real/driver.py's ``features``).
DRIVER_FEATURES = ("preempt_steps", "preemptions", "self_preemptions", "blocked_steps")


def _refused(reason: str):
    return lambda record: any(why.startswith(reason + ":") for why in record["answer"].get("refused", {}).values())


def _ended_at_limit(record: dict) -> bool:
    """A request served and ended by check_stop at max_model_len (its prompt below it, prompt + out above it)."""
    case = record["case"]
    refused = record["answer"].get("refused", {})
    return "max_model_len" in case and any(
        str(k) not in refused and q["prompt"] + q["out"] > case["max_model_len"] > q["prompt"]
        for k, q in enumerate(case["requests"]))


#: Features of a case its answer and the case say (a refusal's reason: the driver's words).
ANSWER_FEATURES = {
    "refused_configuration": _refused("configuration"),
    "refused_prompt": _refused("prompt"),
    "refused_never_fits": _refused("never fits"),
    "ended_at_max_model_len": _ended_at_limit,
}
FEATURES = DRIVER_FEATURES + tuple(ANSWER_FEATURES)
#: Variants of a rule counted apart, ``RULE [what]``: (rule, name, test of the trace's fields).
VARIANTS = (
    ("pool/preempt", "by keys", lambda f: f.get("by") == "keys"),
    ("pool/preempt", "self", lambda f: f.get("session") == f.get("grower")),
    ("step/preempt-parked", "by keys", lambda f: f.get("by") == "keys"),
)
#: Counted with the rules, on a case whose program has ``requeue by key`` and whose run preempted: the
#: harness's answer differs from the answer of the same program with the preempted hold put back at the
#: head of its queue instead (the seed's rule, ``Pool.requeue`` "Head"): the requeue key decided something.
REQUEUE_DECIDES = "session/hold-enter [requeue by key decides]"
#: The rule families a scenario of the harness's program can apply (the others are other constructs').
FAMILIES = ("step/", "pool/", "stage/step", "session/hold", "session/end", "workload/arrive")
#: Rules of those families no scenario can apply: leases, spills, a growth that waits (preempt none),
#: serve exclusive prefill are not in lib/vllm.sq's engine.
UNREACHABLE = ("pool/lease", "pool/lease-end", "pool/spill", "pool/spill-land", "pool/grow-wait",
               "pool/grow-resume", "step/select-prefill", "step/reject")  # step/reject: no space case speculates
UNREACHABLE += ("step/pad", "step/pad-stop")  # speculate's padding (docs/design/speculative-decoding.md, section 8)
UNREACHABLE += ("step/defer", "step/load", "step/promote", "step/promote-stop")  # no space case has a KV connector


def rules_applied(case: dict) -> dict[str, int]:
    """How often each rule of the semantics applied in the harness's run of a scenario (0.33.0's rule)."""
    from semantics.smallstep.driver import build_machine, walk

    from .scenario import scenario_program

    counts: dict[str, int] = {}

    def observe(rule: str, _c, fields) -> None:
        counts[rule] = counts.get(rule, 0) + 1
        for name, variant, test in VARIANTS:
            if rule == name and test(fields or {}):
                counts[f"{name} [{variant}]"] = counts.get(f"{name} [{variant}]", 0) + 1

    data = {k: v for k, v in case.items() if k != "kind"}
    program = scenario_program(data, older_rule=False)
    for _ in walk(build_machine(program, observer=observe), every=False):
        pass
    if requeue_decides(program, data):
        counts[REQUEUE_DECIDES] = 1
    return counts


def requeue_decides(program, data: dict) -> bool:
    """Whether the answer of the scenario ``data``'s program changes when its pools' ``requeue by key``
    is the seed's re-entry at the head instead (only a run that preempted can tell)."""
    import dataclasses

    from semantics.smallstep.driver import run

    from .scenario import answer_of

    if not any(p.requeue == "Key" for p in program.pools):
        return False
    keyed = answer_of(run(program), program, data)
    if not keyed["preemptions"]:
        return False
    head = dataclasses.replace(program, pools=tuple(dataclasses.replace(p, requeue="Head") for p in program.pools))
    return keyed != answer_of(run(head), head, data)


#: The rules of a pool that shares prefixes (docs/design/shared-prefixes.md): no space case has prompt_segments
#: (shared-prefix.jsonl and tests/test_shared_prefix_rules.py apply them).
UNREACHABLE_SHARING = ("pool/hit", "pool/admit-shared", "pool/evict-shared", "pool/register", "pool/release-shared")
#: The rules of a pool with KV cache groups (docs/design/sliding-window.md): no space case has kv_groups
#: (sliding-window.jsonl and tests/test_sliding_window_model.py apply them).
UNREACHABLE_GROUPS = ("pool/admit-groups", "pool/slide", "pool/hit-groups", "pool/admit-shared-groups",
                      "pool/register-window", "pool/slide-shared")


def relevant_rules() -> list[str]:
    from semantics.smallstep.driver import all_rules

    names = []
    for r in all_rules():
        if r.name.startswith(FAMILIES) and r.name not in UNREACHABLE + UNREACHABLE_SHARING + UNREACHABLE_GROUPS:
            names += [r.name] + [f"{r.name} [{variant}]" for name, variant, _ in VARIANTS if name == r.name]
            if r.name == REQUEUE_DECIDES.split(" [")[0]:
                names.append(REQUEUE_DECIDES)
    return names


#: Rules are counted on every EVERY-th case (index 0, EVERY, ...): a run with an observer takes the
#: definitions' slow forms, and the whole corpus would take a quarter of an hour of CPU.
EVERY = 5
#: The rules whose cases (their indices, among those counted) each corpus lists, under ``listed``.
LISTED = ("step/preempt-parked", REQUEUE_DECIDES)


def features_of(record: dict) -> set[str]:
    """The features (``FEATURES``) a recorded case had."""
    return ({f for f in DRIVER_FEATURES if record["answer"]["features"].get(f)}
            | {f for f, test in ANSWER_FEATURES.items() if test(record)})


def draw_of(kind: str):
    """The generator of a whole-space kind: (seed, index) -> (case, regions), and its knobs."""
    if kind == "space":
        return campaign_space.draw, campaign_space.KNOBS
    if kind == "pressure":
        return campaign_space.draw_pressure, campaign_space.PRESSURE_KNOBS
    return campaign_space.draw_all, campaign_space.ALL_KNOBS


def measure(records: list[dict], every: int = EVERY, kind: str = "space", workers: int = 1) -> dict:
    """The coverage data of a corpus's records (module docstring), drawn as
    ``kind``: features over every case, rules over every ``every``-th;
    ``workers``: the cases run on that many processes (semantics.workers: the
    same data whatever the number)."""
    from semantics.workers import run_cases

    rules = relevant_rules()
    _, knobs = draw_of(kind)
    per_case = []
    listed: dict[str, list[int]] = {rule: [] for rule in LISTED}
    for index, (regions, applied, features) in zip(
            (r["index"] for r in records),
            run_cases(_one_case, [(record, every, kind) for record in records], workers=workers)):
        applied = None if applied is None else set(applied)
        for rule in LISTED:
            if applied is not None and rule in applied:
                listed[rule].append(index)
        per_case.append((regions, applied, set(features)))
    out: dict = {"kind": kind, "cases": len(records),
                 "rules_every": every, "features": list(FEATURES), "rules": rules,
                 "total": _tally(per_case, rules), "listed": listed, "regions": {}}
    for knob, names in knobs.items():
        out["regions"][knob] = {}
        for name in names:
            chosen = [c for c in per_case if c[0][knob] == name]
            out["regions"][knob][name] = _tally(chosen, rules)
    return out


def _one_case(job: tuple[dict, int, str]) -> tuple[dict[str, str], list[str] | None, list[str]]:
    """A record's regions, the rules its run applied (None when not counted) and its features."""
    record, every, kind = job
    draw, _ = draw_of(kind)
    case, regions = draw(record["seed"], record["index"])
    if case != record["case"]:
        raise ValueError(f"case {record['seed']}/{record['index']} is not what oracle/campaign_space.py draws")
    applied = None
    if record["index"] % every == 0:
        counts = rules_applied(record["case"])
        applied = [r for r in relevant_rules() if counts.get(r)]
    return regions, applied, sorted(features_of(record))


def _tally(cases: list, rules: list[str]) -> dict:
    """A region's entry: its cases, per feature the cases that had it, and
    over the cases whose rules were counted (``rules_cases``) per rule those
    that applied it; ``never``: the rules none of those applied."""
    counted = [c for c in cases if c[1] is not None]
    entry = {"cases": len(cases),
             "features": {f: sum(f in c[2] for c in cases) for f in FEATURES},
             "rules_cases": len(counted),
             "rules": {r: sum(r in c[1] for c in counted) for r in rules}}
    entry["never"] = [r for r, n in entry["rules"].items() if n == 0] if counted else []
    return entry


def read(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def measure_all(directory: Path = CAMPAIGN, workers: int = 1) -> dict:
    """The coverage data of every corpus of ``CORPORA`` in ``directory``."""
    return {"format": "serq-ref/space-coverage", "version": 3,
            "corpora": {name: measure(read(directory / name), EVERY, kind, workers)
                        for name, kind in CORPORA.items()}}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m oracle.space_coverage", description=__doc__.split("\n\n")[0])
    parser.add_argument("--campaign", default=str(CAMPAIGN), help="the directory of the corpora")
    parser.add_argument("--out", default=str(OUT))
    parser.add_argument("--workers", type=int, default=1, help="run the cases on N processes (the same data)")
    args = parser.parse_args(argv)
    data = measure_all(Path(args.campaign), max(1, args.workers))
    Path(args.out).write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    for name, corpus in data["corpora"].items():
        print(f"{name}: {corpus['cases']} cases; rules never applied: {', '.join(corpus['total']['never']) or 'none'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
