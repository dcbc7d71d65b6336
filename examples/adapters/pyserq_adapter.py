"""A conformance adapter (docs/conformance.md): pyserq, the serQ reference
implementation, answers a vLLM scenario. serq-ref only builds the program
(lib/vllm.sq's engine with the scenario's constants, its requests as explicit
sessions: oracle/scenario.py); pyserq runs it.

    python examples/adapters/pyserq_adapter.py SCENARIO.json   # prints the answer, the .out.json shape
"""
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # serq-ref's oracle/ and semantics/
from oracle.peer import run_on_pyserq  # noqa: E402
from oracle.scenario import beyond_the_seed, read_json, scenario_program  # noqa: E402
from semantics.errors import SerqError  # noqa: E402


def answer(scenario: dict, path: str = "<scenario>") -> dict:
    # pyserq has seed 002's model: no speculative decoding, no prefixes shared across requests
    why = "speculative decoding (spec_tokens)" if scenario.get("spec_tokens") else beyond_the_seed(scenario)
    if why: return {"unsupported": why}  # noqa: E701
    # pyserq's step engine has the older self-preemption rule only (docs/divergences.md, D1)
    report = run_on_pyserq(scenario_program(scenario, path, older_rule=True))

    def steps(name, pick):  # per request (the session's serial), the step of its sample; pick: of several
        observe, out = report.observes[name], {}
        for session, time in zip(observe.sessions, observe.times):
            out.setdefault(int(session), []).append(int(time))
        return {str(k): pick(v) for k, v in sorted(out.items())}

    first, done = steps("ttft", min), steps("done", max)
    return {"first": first, "done": done, "preemptions": report.pool("kv").preemptions,
            "steps": max(done.values(), default=0) + 1}


if __name__ == "__main__":
    if len(sys.argv) != 2: sys.exit("usage: python examples/adapters/pyserq_adapter.py SCENARIO.json")  # noqa: E701
    try:
        print(json.dumps(answer(read_json(sys.argv[1]), sys.argv[1])))
    except SerqError as error:
        sys.exit(f"pyserq_adapter: {sys.argv[1]}: {error.message}")
