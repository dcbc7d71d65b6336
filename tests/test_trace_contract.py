"""The step trace as a contract (issue 12; docs/step-trace.md): the header,
one type per field, jobs named by session and run, the keys of every choice,
the schema, and the same trace for the same program and seed byte for byte.

Every record of every trace the suite makes is also checked against the
schema as it is made (tests/trace_contract.py); here the schema itself, its
compiled checker against jsonschema, the CLI's lines, and what the records
say about the run.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import json
import pathlib
import re

import pytest

from ir_schema import steptrace as schema_module
from semantics import codec
from semantics.cli import main
from semantics.compiler import compile_source
from semantics.smallstep import driver, steptrace
from semantics.smallstep.rules import REGISTRY
from test_smallstep_rules import PROGRAMS, oracle_programs
import trace_contract

ROOT = pathlib.Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples"


def _program(name: str):
    return compile_source(PROGRAMS[name], f"<{name}>")[0]


def _records(program, **options) -> list[dict]:
    return list(driver.trace(program, **options))


def _cli(capsys, *args) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


# -- the schema ---------------------------------------------------------------------------


def test_the_schema_file_is_the_formats_definition_written_out():
    assert schema_module.load_schema() == steptrace.schema(), \
        "ir_schema/steptrace.schema.json is steptrace.schema() written out: write it again"
    import jsonschema

    jsonschema.Draft202012Validator.check_schema(schema_module.load_schema())


def test_the_format_defines_every_registered_rule_and_no_other():
    assert set(steptrace.FIELDS) == set(REGISTRY)


def test_the_docs_define_every_field_of_every_record_with_its_type():
    """docs/step-trace.md's table of records lists exactly FIELDS: each rule, its fields in order, their types."""
    text = (ROOT / "docs" / "step-trace.md").read_text()
    table = text[text.index("## The records"):text.index("### What each field means")]
    kinds = {"integer": steptrace.INT, "session": steptrace.INT, "session-or-null": steptrace.SESSION_OR_NULL}
    documented = {}
    for line in table.splitlines():
        if not line.startswith("| `"):
            continue
        _, rules, fields, _ = line.split("|")
        spec = tuple((field, kinds.get(kind, kind)) for field, kind in re.findall(r"([a-z_]+): ([a-z-]+)", fields))
        for rule in re.findall(r"`([a-z]+/[a-z-]+)`", rules):
            documented[rule] = spec
    assert set(documented) == set(steptrace.FIELDS)
    for rule, spec in steptrace.FIELDS.items():
        assert documented[rule] == spec, f"{rule}: docs say {documented[rule]}, the format {spec}"


def _sample_records() -> list[dict]:
    """Records of every rule: the rule programs, the reference's vLLM programs, the pool examples."""
    records = []
    for name in sorted(PROGRAMS):
        records += _records(_program(name))
    for program in oracle_programs():
        records += _records(program, steps=2000)
    for path in sorted((EXAMPLES / "pools").glob("*.sq")):
        records += _records(compile_source(path.read_text(), str(path))[0])
    from oracle.scenario import scenario_program  # schedule ahead: step/park, step/apply, step/preempt-parked

    records += _records(scenario_program(ASYNC_CASE))
    records += _records(scenario_program(DEFER_CASE))  # defer free: step/defer
    records += _records(scenario_program(LOAD_CASE))  # load remote: step/load, step/promote, step/promote-stop
    for name in ("load_back", "store_pending_waits", "load_in_flight"):  # offload to: the CPU tier's rules
        records += _records(scenario_program(json.loads((ROOT / "tests" / "data" / "cpu_offload" / f"{name}.json")
                                                        .read_text())))
    one = json.loads((ROOT / "tests" / "data" / "cpu_offload" / "one_token_loads_forever.json").read_text())
    records += _records(dataclasses.replace(scenario_program(one), horizon=14.0))  # offload/reload (bounded)
    return records


#: oracle/data/campaign/async-scenarios.jsonl case 128: lib/vllm.sq's engine under schedule ahead, where a
#: parked request is preempted (tests/test_async_scheduling.py)
ASYNC_CASE = {"budget": 256, "max_seqs": 8, "block_size": 8, "num_blocks": 34, "chunk": 20, "prefix_caching": True,
              "requests": [{"prompt": 61, "out": 1, "arrive": 23}, {"prompt": 150, "out": 3, "arrive": 20},
                           {"prompt": 44, "out": 2, "arrive": 30}, {"prompt": 94, "out": 35, "arrive": 11},
                           {"prompt": 15, "out": 1, "arrive": 20}, {"prompt": 141, "out": 2, "arrive": 24}],
              "async": True}


#: oracle/data/campaign/kv-connector-noload.jsonl case 200: a KV consumer connector that loads nothing under
#: schedule ahead, where a growth's victim is in flight (step/defer; docs/design/kv-connector.md)
DEFER_CASE = {"budget": 32, "max_seqs": 7, "block_size": 16, "num_blocks": 37, "chunk": 0, "prefix_caching": False,
              "requests": [{"prompt": 493, "out": 75, "remote": 0}, {"prompt": 200, "out": 68, "remote": 0},
                           {"prompt": 20, "out": 10, "arrive": 20, "remote": 0},
                           {"prompt": 9, "out": 1, "arrive": 6, "remote": 0},
                           {"prompt": 11, "out": 58, "arrive": 3, "remote": 0},
                           {"prompt": 479, "out": 53, "arrive": 1, "remote": 0},
                           {"prompt": 25, "out": 57, "arrive": 6, "remote": 0}],
              "async": True}


#: oracle/data/campaign/kv-connector.jsonl case 52: two partial remote loads, one request slot (step/load,
#: step/promote, step/promote-stop; docs/design/kv-connector.md)
LOAD_CASE = {"budget": 20, "max_seqs": 1, "block_size": 34, "num_blocks": 17, "chunk": 18, "prefix_caching": True,
             "requests": [{"prompt": 144, "out": 22, "remote": 33, "kv_delay": 0},
                          {"prompt": 181, "out": 9, "remote": 93, "kv_delay": 0}], "async": True}


@pytest.fixture(scope="module")
def sample() -> list[dict]:
    return _sample_records()


def test_jsonschema_accepts_the_records_of_every_rule(sample):
    """The reference validator on one record of every (rule, shape); the compiled checker on all of them."""
    check = schema_module.checker()
    shapes = {}
    for record in sample:
        check(record)
        shape = (record["rule"],) + tuple((k, type(v).__name__, len(v) if isinstance(v, list) else None)
                                          for k, v in record.items())
        shapes.setdefault(shape, record)
    assert {r["rule"] for r in shapes.values()} == set(REGISTRY), "the sample applies every rule"
    for record in shapes.values():
        assert schema_module.errors(record) == [], record


def _mutations(record: dict):
    """Records that are not the format: a field dropped, one added, a value of another type."""
    fields = [k for k in record if k not in ("rule",)]
    yield "dropped", {k: v for k, v in record.items() if k != fields[-1]}
    yield "added", {**record, "extra": 1}
    for k, v in record.items():
        if k == "rule":
            continue
        if isinstance(v, bool):
            yield f"{k} as a string", {**record, k: "yes"}
        elif isinstance(v, int):
            yield f"{k} negative", {**record, k: -1}
        elif isinstance(v, float):
            yield f"{k} as a list", {**record, k: [v]}
        elif isinstance(v, str) and k in ("job", "mode", "order", "by", "outcome"):
            yield f"{k} unknown", {**record, k: "?" + v}
        elif isinstance(v, list) and v:
            changed = copy.deepcopy(v)
            changed[0] = {"x": 1}
            yield f"{k}[0] an object", {**record, k: changed}


def test_the_checker_and_jsonschema_refuse_what_is_not_the_format(sample):
    check = schema_module.checker()
    firsts = {}
    for record in sample:
        firsts.setdefault(record["rule"], record)
    refused = 0
    for record in firsts.values():
        for what, bad in _mutations(record):
            assert schema_module.errors(bad), f"jsonschema accepts {what}: {bad}"
            with pytest.raises(schema_module.TraceLineError):
                check(bad)
            refused += 1
    assert refused > 3 * len(firsts)


def test_the_checker_is_strict_about_order_and_number_types():
    """What JSON Schema's data model cannot say, the format does: one written form per field."""
    check = schema_module.checker()
    good = {"rule": "session/choose", "time": 0.0, "session": 3, "attribute": "j", "index": 1, "keys": [[2.0], [1.0]]}
    check(good)
    as_float = {**good, "index": 1.0}
    assert schema_module.errors(as_float) == []  # JSON Schema: 1.0 is an integer
    with pytest.raises(schema_module.TraceLineError, match="order"):
        check(as_float)
    with pytest.raises(schema_module.TraceLineError):
        check({**good, "time": 0})  # a real written without a fraction
    reordered = {"rule": "session/choose", "session": 3, "time": 0.0, "attribute": "j", "index": 1, "keys": []}
    with pytest.raises(schema_module.TraceLineError, match="order"):
        check(reordered)
    check({**good, "keys": [["inf"], ["nan"]]})  # non-finite keys as strings


def test_the_suite_checks_every_trace_it_makes():
    """tests/trace_contract.py has replaced driver.trace: a record that is not the format fails the test."""
    assert driver.trace is trace_contract.checked_trace
    with pytest.raises(schema_module.TraceLineError):
        trace_contract._check({"rule": "workload/arrive", "time": 0.0, "session": 1.0})


# -- the header and the CLI ------------------------------------------------------------------


def test_the_cli_writes_the_header_then_records_that_jsonschema_accepts(capsys, tmp_path):
    path = EXAMPLES / "pools" / "spill.sq"
    code, out, err = _cli(capsys, "trace", str(path), "--steps", "all", "--seed", "7")
    assert code == 0, err
    lines = [json.loads(line) for line in out.splitlines()]
    head = lines[0]
    assert list(head) == ["format", "version", "serq_ref", "ir", "program", "seed", "horizon", "warmup", "arrivals",
                          "from"]
    assert head["format"] == "serq-ref/step-trace" and head["version"] == 1 and head["seed"] == 7
    code, ir_text, _ = _cli(capsys, "ir", str(path), "--seed", "7")
    assert head["program"] == hashlib.sha256(ir_text.encode()).hexdigest()
    assert head["horizon"] == codec.loads(ir_text).horizon
    check = schema_module.checker()
    for line in lines:
        check(line)
        assert schema_module.errors(line) == []
    assert all("rule" in line for line in lines[1:])


def test_the_header_digest_changes_with_the_program(capsys):
    path = str(EXAMPLES / "pools" / "queue_by.sq")
    digests = set()
    for seed in ("1", "2"):
        code, out, _ = _cli(capsys, "trace", path, "--steps", "1", "--seed", seed)
        digests.add(json.loads(out.splitlines()[0])["program"])
    assert len(digests) == 2


def test_the_same_program_and_seed_give_the_same_trace_byte_for_byte(capsys):
    path = str(EXAMPLES / "pools" / "evict_by.sq")
    outputs = [_cli(capsys, "trace", path, "--steps", "all")[1] for _ in range(2)]
    assert outputs[0] == outputs[1] and outputs[0].count("\n") > 20
    other = _cli(capsys, "trace", path, "--steps", "all", "--seed", "99")[1]
    assert other.splitlines()[0] != outputs[0].splitlines()[0]


def test_coverage_counts_the_rules_of_one_run(capsys):
    path = str(EXAMPLES / "pools" / "preempt.sq")
    code, out, err = _cli(capsys, "trace", path, "--coverage")
    assert code == 0, err
    lines = out.splitlines()
    counts = {}
    for line in lines[:len(REGISTRY)]:
        n, name = line.split()
        counts[name] = int(n.replace(",", ""))
    assert list(counts) == [r.name for r in driver.all_rules()]
    traced = {}
    for record in driver.trace(compile_source((EXAMPLES / "pools" / "preempt.sq").read_text(), path)[0]):
        traced[record["rule"]] = traced.get(record["rule"], 0) + 1
    assert {k: v for k, v in counts.items() if v} == traced
    never = sorted(name for name, n in counts.items() if n == 0)
    assert lines[-2] == f"{len(traced)} of {len(REGISTRY)} rules applied, {sum(traced.values())} times in all"
    assert lines[-1] == f"never applied ({len(never)}): {', '.join(r.name for r in driver.all_rules() if r.name in never)}"


# -- what the records say ----------------------------------------------------------------------


def test_jobs_are_named_by_session_and_run():
    """docs/step-trace.md, Jobs: "S/N", the N-th job session S started, N from 1 in order."""
    records = _records(_program("statements"))
    started: dict[int, list[str]] = {}
    for r in records:
        if r["rule"].endswith("-enter") and r["rule"].startswith("stage/"):
            started.setdefault(r["session"], []).append(r["job"])
    assert started
    for serial, jobs in started.items():
        assert jobs == [f"{serial}/{n}" for n in range(1, len(jobs) + 1)]
    named = {job for jobs in started.values() for job in jobs}
    for r in records:
        for job in ([r["job"]] if "job" in r else []) + r.get("jobs", []):
            assert job in named


def test_jobs_do_not_depend_on_from_time():
    program = _program("statements")
    everything = _records(program)
    late = _records(program, from_time=3.0)
    assert late == [r for r in everything if r["time"] >= 3.0]


def test_spill_writes_are_named_by_pool_and_spill():
    records = _records(_program("pools"))
    spills = [r for r in records if r["rule"] == "pool/spill"]
    assert spills and [r["write"] for r in spills] == [f"kv/spill/{n}" for n in range(1, len(spills) + 1)]
    writes = {r["job"] for r in records if r["rule"].startswith("stage/") and r.get("session", 0) is None}
    assert writes and writes <= {r["write"] for r in spills}
    landed = [r["write"] for r in records if r["rule"] == "pool/spill-land"]
    assert landed and set(landed) <= {r["write"] for r in spills}


def test_choose_records_every_candidates_keys():
    source = """
stage s[3] : fifo(1);
workload { arrive batch(4); }
session { choose j in 3 by (queue(s[j]), 0 - j); run s[j] (1); }
run { horizon 10; seed 1; }
"""
    records = [r for r in _records(compile_source(source, "<choose>")[0]) if r["rule"] == "session/choose"]
    assert len(records) == 4
    for r in records:
        keys = r["keys"]
        assert len(keys) == 3 and all(len(k) == 2 for k in keys)
        assert isinstance(r["index"], int)
        assert r["index"] == min(range(3), key=lambda j: (keys[j], j))
        assert [k[1] for k in keys] == [0.0, -1.0, -2.0]
    # the first session finds every stage empty: the second key (0 - j) decides, so the last index
    assert records[0]["index"] == 2


def test_queue_by_records_the_admitted_key_and_the_runner_up():
    source = """
pool slots { cap 1; queue by (0 - serial); }
stage d : delay;
workload { arrive batch(4); }
session { hold slots (1) { run d (1); } }
run { horizon 20; seed 1; }
"""
    admits = [r for r in _records(compile_source(source, "<queue>")[0]) if r["rule"] == "pool/admit"]
    # the batch joins the queue before anyone is admitted: the greatest serial first
    assert [r["session"] for r in admits] == [3, 2, 1, 0]
    assert all(r["order"] == "keys" and r["key"] == [0.0 - r["session"]] for r in admits)
    assert [r["runner_up"] for r in admits] == [{"session": 2, "key": [-2.0]}, {"session": 1, "key": [-1.0]},
                                                {"session": 0, "key": [0.0]}, None]


def test_evictions_record_their_order_and_key():
    lru = [r for r in _records(_program("pools")) if r["rule"].startswith("pool/evict")]
    assert lru and all(r["order"] == "lru" and r["key"] == [r["released"]] for r in lru)
    for r in lru:
        if r["runner_up"] is not None:
            assert r["runner_up"]["released"] >= r["released"]
    path = EXAMPLES / "pools" / "evict_by.sq"
    by = [r for r in _records(compile_source(path.read_text(), str(path))[0]) if r["rule"].startswith("pool/evict")]
    by = [r for r in by if r["order"] == "keys"]  # the example has an lru pool beside its evict by pools
    assert by and all(len(r["key"]) >= 1 for r in by)
    for r in by:
        if r["runner_up"] is not None:
            assert r["runner_up"]["key"] >= r["key"]


def test_serving_records_the_order_and_the_runner_up():
    records = []
    for program in oracle_programs():
        records += [r for r in _records(program, steps=3000) if r["rule"] == "step/schedule"]
    orders = {r["order"] for r in records}
    assert orders and orders <= {"keys", "admission", "prefill-first"}
    keyed = [r for r in records if r["order"] == "keys"]
    for r in keyed:
        if r["runner_up"] is not None:
            assert r["runner_up"]["key"] >= r["key"] and r["runner_up"]["job"] != r["job"]
    exclusive = [r for r in _records(_program("exclusive prefill")) if r["rule"] == "step/schedule"]
    assert exclusive and {r["order"] for r in exclusive} == {"prefill-first"}


def test_a_preemption_records_its_candidates_victim_last():
    records = _records(_program("growth"))
    preemptions = [r for r in records if r["rule"] == "pool/preempt"]
    assert preemptions
    for r in preemptions:
        assert r["candidates"][-1] == r["session"] and r["by"] == "holders"
        assert r["grower"] in r["candidates"] or r["grower"] == r["session"]
    memory = []
    for program in oracle_programs():
        memory += [r for r in _records(program) if r["rule"] == "pool/preempt"]
    assert memory and all(r["by"] == "memory" and r["candidates"][-1] == r["session"] for r in memory)


def test_the_library_offers_the_header_apart_and_with_the_records():
    """driver.trace yields records only (its readers are not broken); tracefile.lines is what the CLI prints."""
    from semantics.tracefile import header, lines

    program = _program("growth")
    both = list(lines(program, steps=5))
    assert both[0] == header(program) and both[1:] == _records(program, steps=5)
    assert "rule" not in both[0] and all("rule" in r for r in both[1:])
