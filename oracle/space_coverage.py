"""What each region of the whole-space campaign exercises (issue 18, §4).

    python -m oracle.space_coverage [FILE.jsonl] [--out docs/data/space_coverage.json]

For every case of oracle/data/campaign/space.jsonl (drawn by
oracle/campaign_space.py, which gives each case's regions again from its
seed and index): the rules of serq-ref's step engine that applied while the
harness's program ran the case (the small-step semantics with an observer,
as ``serq-ref trace --coverage`` counts them), (on every fifth case: ``EVERY``), and the features the real
scheduler's answer counted (oracle/real/driver.py's ``features``:
preempt_steps, preemptions, self_preemptions, blocked_steps). Written per
knob and region: the cases of the region, how many of them had each
feature, and of those whose rules were counted how many applied each rule
at least once. Rules no case of a region
applied are listed under ``never``. No times or dates: the same bytes for
the same code and corpus.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from . import campaign_space

ROOT = Path(__file__).resolve().parent.parent
CORPUS = Path("oracle/data/campaign/space.jsonl")
OUT = Path("docs/data/space_coverage.json")
FEATURES = ("preempt_steps", "preemptions", "self_preemptions", "blocked_steps")
#: The rule families a scenario of the harness's program can apply (the others are other constructs').
FAMILIES = ("step/", "pool/", "stage/step", "session/hold", "session/end", "workload/arrive")
#: Rules of those families no scenario can apply: leases, spills, a growth that waits (preempt none),
#: serve exclusive prefill are not in lib/vllm.sq's engine.
UNREACHABLE = ("pool/lease", "pool/lease-end", "pool/spill", "pool/spill-land", "pool/grow-wait",
               "pool/grow-resume", "step/select-prefill")


def rules_applied(case: dict) -> dict[str, int]:
    """How often each rule of the semantics applied in the harness's run of a scenario (0.33.0's rule)."""
    from semantics.smallstep.driver import build_machine, walk

    from .scenario import scenario_program

    counts: dict[str, int] = {}

    def observe(rule: str, _c, _fields) -> None:
        counts[rule] = counts.get(rule, 0) + 1

    program = scenario_program({k: v for k, v in case.items() if k != "kind"}, older_rule=False)
    for _ in walk(build_machine(program, observer=observe), every=False):
        pass
    return counts


def relevant_rules() -> list[str]:
    from semantics.smallstep.driver import all_rules

    return [r.name for r in all_rules() if r.name.startswith(FAMILIES) and r.name not in UNREACHABLE]


#: Rules are counted on every EVERY-th case (index 0, EVERY, ...): a run with an observer takes the
#: definitions' slow forms, and the whole corpus would take a quarter of an hour of CPU.
EVERY = 5


def measure(records: list[dict], every: int = EVERY) -> dict:
    """The coverage data of a corpus's records (module docstring): features
    over every case, rules over every ``every``-th."""
    rules = relevant_rules()
    per_case = []
    for record in records:
        case, regions = campaign_space.draw(record["seed"], record["index"])
        if case != record["case"]:
            raise ValueError(f"case {record['seed']}/{record['index']} is not what oracle/campaign_space.py draws")
        applied = None
        if record["index"] % every == 0:
            counts = rules_applied(record["case"])
            applied = {r for r in rules if counts.get(r)}
        per_case.append((regions, applied, {f for f in FEATURES if record["answer"]["features"].get(f)}))
    out: dict = {"format": "serq-ref/space-coverage", "version": 1, "cases": len(records),
                 "rules_every": every, "features": list(FEATURES), "rules": rules,
                 "total": _tally(per_case, rules), "regions": {}}
    for knob, names in campaign_space.KNOBS.items():
        out["regions"][knob] = {}
        for name in names:
            chosen = [c for c in per_case if c[0][knob] == name]
            out["regions"][knob][name] = _tally(chosen, rules)
    return out


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


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m oracle.space_coverage", description=__doc__.split("\n\n")[0])
    parser.add_argument("corpus", nargs="?", default=str(CORPUS))
    parser.add_argument("--out", default=str(OUT))
    args = parser.parse_args(argv)
    data = measure(read(Path(args.corpus)))
    Path(args.out).write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    total = data["total"]
    print(f"{data['cases']} cases; rules never applied: {', '.join(total['never']) or 'none'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
