"""A deliberately wrong engine for `serq-ref oracle check --engine` (tests/
test_engine_author.py): serq-ref's own scenario program, but with two
mistakes an engine author could make, so the check's summary has content.

- It forgets vLLM's null block: all `num_blocks` blocks are usable (one too
  many), so a tight pool preempts less, or later, than vLLM's.
- It has no priority path: a scenario with a `serve` key makes it exit with status 1.

With $SERQ_SCHEDULE_LOG set it writes its schedule log there (the format of
docs/conformance.md, "The schedule log"), as `--logs DIR` asks.

    python tests/data/engines/no_null_block.py SCENARIO.json
"""
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[3]))  # serq-ref's oracle/ and semantics/
from oracle.scenario import read_json, run_scenario  # noqa: E402
from oracle.schedule_log import serq_log, write_log  # noqa: E402

if __name__ == "__main__":
    scenario = read_json(sys.argv[1])
    if "serve" in scenario:
        sys.exit("no_null_block: no priority path (a serve key)")
    wrong = dict(scenario, num_blocks=scenario["num_blocks"] + 1)  # the mistake: no null block
    log = os.environ.get("SERQ_SCHEDULE_LOG")
    if log:
        answer, records = serq_log(wrong, sys.argv[1], older_rule=False)
        records[0]["engine"] = "no_null_block (a wrong toy)"
        write_log(records, log)
    else:
        answer = run_scenario(wrong, sys.argv[1], older_rule=False)
    print(json.dumps(answer))
