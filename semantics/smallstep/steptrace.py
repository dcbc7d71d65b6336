"""The step trace as a format (docs/step-trace.md): a header, then one record
per applied rule, ``{"rule": name, "time": t, ...its fields...}``.

``FIELDS`` is the format's definition: for every rule, its fields in the
order a record lists them, each with one type. The JSON Schema
(ir_schema/steptrace.schema.json) is made from it (``schema``), and a
``Tracer`` turns what a rule reports into its record:

- numbers get their one type: a count or an index is a JSON integer, a
  time, a number of units or tokens, a value or a key is a float, and a
  non-finite float is the string "inf", "-inf" or "nan" (strict JSON);
- a job is named as another engine can name it (``job_name``): the run of a
  session by the session's serial and the ordinal of its job (``"7/2"``: the
  second job of session 7), a spill write by its pool and the ordinal of its
  spill (``"kv/spill/3"``), never by the run's internal sequence number;
- the fields come in ``FIELDS`` order, after ``rule`` and ``time``.

Nothing here takes part in a run: the rules report what they did, and the
tracer only renames and retypes it.
"""

from __future__ import annotations

import math

#: the format's name and version (the header's ``format`` and ``version``)
FORMAT = "serq-ref/step-trace"
VERSION = 1

# -- the types of fields ------------------------------------------------------------------
#
# Each is a name the tracer's coercion and the schema both read.

INT = "int"  # a count, an index, a serial: a JSON integer, 0 or more
REAL = "real"  # a float, or "inf" / "-inf" / "nan"
BOOL = "bool"
NAME = "name"  # a pool's or a stage's name as the program writes it (kv, kv[2]), an attribute's, an observation's
SESSION_OR_NULL = "session?"  # a serial, or null (a spill write has no session)
JOB = "job"  # "S/R" or "POOL/spill/N"
JOBS = "jobs"  # a list of jobs
NAMES = "names"
KEY = "key"  # a list of reals: the values of a choice's keys, in the order the program writes them
KEYS = "keys"  # a list of keys
SERIALS = "serials"  # a list of serials
MODE = "mode"
OUTCOME = "outcome"
QUEUE_ORDER = "queue-order"
EVICT_ORDER = "evict-order"
SERVE_ORDER = "serve-order"
VICTIM_BY = "victim-by"
ALLOCATIONS = "allocations"  # a list of {"pool": name, "units": real}
ADMIT_RUNNER = "admit-runner"  # null, or {"session": serial, "key": key}
EVICT_RUNNER = "evict-runner"  # null, or {"source": serial, "released": real, "key": key}
SERVE_RUNNER = "serve-runner"  # null, or {"session": serial, "job": job, "key": key}
STAGE_OR_FLOW = "stage-or-flow"  # a stage's name, or "flow"
WAIT_WHY = "wait-why"  # offload/wait: a chunk being written, a chunk being loaded, or a transfer of its own

_ENUMS = {
    MODE: ("prefill", "decode"),
    OUTCOME: ("grew", "waits", "preempted", "deferred"),
    QUEUE_ORDER: ("join", "keys", "head"),
    EVICT_ORDER: ("lru", "keys"),
    SERVE_ORDER: ("admission", "keys", "prefill-first"),
    VICTIM_BY: ("holders", "memory", "keys"),
    WAIT_WHY: ("pending", "loading", "transfer"),
}

_SESSION = ("session", INT)
_POOL = ("pool", NAME)
_STAGE = ("stage", NAME)
_EVICT = (_POOL, ("source", INT), ("dead", BOOL), ("units", REAL), ("left", REAL), ("released", REAL),
          ("order", EVICT_ORDER), ("key", KEY), ("runner_up", EVICT_RUNNER))
_COMPLETE = (_STAGE, ("job", JOB), ("session", SESSION_OR_NULL))
_ENTER = (_STAGE, ("job", JOB), ("session", SESSION_OR_NULL), ("work", REAL))

#: every rule's fields, in the order its record lists them (after rule and time)
FIELDS: dict[str, tuple[tuple[str, str], ...]] = {
    "workload/arrive": (_SESSION,),
    "session/set": (_SESSION, ("attribute", NAME), ("value", REAL)),
    "session/observe": (_SESSION, ("name", NAME), ("value", REAL)),
    "session/turn": (_SESSION,),
    "session/branch": (_SESSION, ("taken", BOOL)),
    "session/loop": (_SESSION,),
    "session/loop-again": (_SESSION,),
    "session/block-exit": (_SESSION,),
    "session/hold-exit": (_SESSION,),
    "session/end": (_SESSION,),
    "session/while": (_SESSION, ("again", BOOL)),
    "session/while-again": (_SESSION, ("again", BOOL)),
    "session/choose": (_SESSION, ("attribute", NAME), ("index", INT), ("keys", KEYS)),
    "session/run": (_SESSION, ("stages", NAMES), ("work", REAL)),
    "session/hold-enter": (_SESSION, _POOL, ("head", BOOL), ("queued", INT)),
    "session/drop": (_SESSION, _POOL, ("units", REAL)),
    "session/load": (_SESSION, _POOL, ("position", REAL)),
    "pool/reject": (_SESSION, _POOL, ("units", REAL), ("reserve", REAL)),
    "pool/admit": (_SESSION, _POOL, ("units", REAL), ("allocations", ALLOCATIONS), ("cached", REAL), ("waited", REAL),
                   ("order", QUEUE_ORDER), ("key", KEY), ("runner_up", ADMIT_RUNNER)),
    "pool/consume": (_SESSION, _POOL, ("consumed", REAL), ("dead", REAL)),
    "pool/evict-block": _EVICT,
    "pool/evict-entry": _EVICT,
    "pool/spill": (_POOL, ("tier", NAME), ("via", NAME), ("source", INT), ("units", REAL), ("work", REAL), ("write", JOB)),
    "pool/spill-land": (_POOL, ("source", INT), ("units", REAL), ("write", JOB)),
    "pool/release": (_SESSION, _POOL, ("units", REAL), ("cached", REAL)),
    "pool/lease-end": (_SESSION, _POOL, ("units", REAL), ("cached", REAL)),
    "pool/lease": (_SESSION, _POOL, ("units", REAL), ("seconds", REAL)),
    "pool/grow": (_SESSION, _POOL, ("units", REAL)),
    "pool/grow-wait": (_SESSION, _POOL, ("units", REAL)),
    "pool/grow-resume": (_SESSION, _POOL, ("units", REAL)),
    "pool/preempt": (_SESSION, _POOL, ("computed", REAL), ("grower", INT), ("by", VICTIM_BY), ("candidates", SERIALS)),
    # a pool that shares prefixes (docs/design/shared-prefixes.md)
    "pool/hit": (_SESSION, _POOL, ("blocks", INT), ("units", REAL), ("freed", INT)),
    "pool/admit-shared": (_SESSION, _POOL, ("hit", INT), ("revived", INT), ("new", INT)),
    "pool/evict-shared": (_POOL, ("block", INT), ("copies", INT), ("free", INT)),
    "pool/register": (_SESSION, _POOL, ("from", INT), ("to", INT)),
    "pool/release-shared": (_SESSION, _POOL, ("blocks", INT), ("freed", INT), ("cached", INT)),
    # a pool with KV cache groups (docs/design/sliding-window.md)
    "pool/admit-groups": (_SESSION, _POOL, ("coverage", REAL), ("units", REAL), ("groups", INT), ("sequence", REAL),
                          ("cap", REAL)),
    "pool/slide": (_SESSION, _POOL, ("processed", REAL), ("blocks", INT), ("skipped", INT), ("units", REAL)),
    # ... that shares prefixes (docs/design/sliding-window.md §1 (c))
    "pool/hit-groups": (_SESSION, _POOL, ("blocks", INT), ("units", REAL), ("window", INT), ("skipped", INT),
                        ("junction", REAL), ("freed", INT)),
    "pool/admit-shared-groups": (_SESSION, _POOL, ("hit", INT), ("revived", INT), ("new", INT), ("groups", INT),
                                 ("skipped", INT)),
    "pool/register-window": (_SESSION, _POOL, ("from", INT), ("to", INT), ("registered", INT)),
    "pool/slide-shared": (_SESSION, _POOL, ("processed", REAL), ("blocks", INT), ("skipped", INT), ("freed", INT),
                          ("cached", INT)),
    "stage/fifo-enter": _ENTER,
    "stage/ps-enter": _ENTER + (("present", INT),),
    "stage/delay-enter": _ENTER,
    "stage/fifo-start": (_STAGE, ("jobs", JOBS)),
    "stage/flow-enter": (("stages", NAMES), ("job", JOB), ("session", SESSION_OR_NULL), ("work", REAL)),
    "stage/fifo-complete": _COMPLETE,
    "stage/ps-complete": _COMPLETE,
    "stage/delay-complete": _COMPLETE,
    "stage/flow-complete": _COMPLETE,
    "stage/step-complete": _COMPLETE,
    "stage/leave": (("stage", STAGE_OR_FLOW), ("job", JOB), ("session", SESSION_OR_NULL)),
    "stage/step-enter": (_STAGE, ("job", JOB), ("session", INT), ("mode", MODE), ("work", REAL)),
    "time/advance": (("to", REAL),),
    "step/iteration-start": (_STAGE, ("iteration", INT), ("budget", REAL), ("chunk", REAL), ("residents", INT)),
    "step/schedule": (_STAGE, ("job", JOB), ("session", INT), ("mode", MODE), ("tokens", REAL), ("grow", REAL),
                      ("left", REAL), ("order", SERVE_ORDER), ("key", KEY), ("runner_up", SERVE_RUNNER)),
    "step/grow": (_STAGE, ("job", JOB), ("session", INT), _POOL, ("outcome", OUTCOME), ("left", REAL)),
    "step/withdraw": (_STAGE, ("job", JOB), ("session", INT), ("tokens", REAL), ("left", REAL)),
    "step/select-prefill": (_STAGE, ("job", JOB), ("session", INT), ("tokens", REAL), ("displaced", JOBS),
                            ("left", REAL)),
    "step/admit": (_STAGE, _POOL, ("session", INT), ("left", REAL)),
    "step/admit-stop": (_STAGE, _POOL, ("session", INT)),
    "step/iteration": (_STAGE, ("iteration", INT), ("tokens", REAL), ("decoders", INT), ("prefilled", REAL),
                       ("attention", REAL), ("cost", REAL), ("preempted", BOOL)),
    "step/idle": (_STAGE,),
    "step/iteration-end": (_STAGE, ("iteration", INT), ("done", JOBS)),
    "step/reject": (_STAGE, ("job", JOB), ("session", INT), ("drafts", REAL), ("accepted", REAL), ("rollback", REAL)),
    "step/park": (_STAGE, ("session", INT)),
    "step/apply": (_STAGE, ("sessions", SERIALS)),
    "step/preempt-parked": (_STAGE, ("session", INT), _POOL, ("grower", INT), ("by", VICTIM_BY),
                            ("candidates", SERIALS)),
    "step/pad": (_STAGE, ("job", JOB), ("session", INT), ("tokens", REAL), ("drafts", REAL), ("grow", REAL),
                 ("left", REAL)),
    "step/pad-stop": (_STAGE, _POOL, ("session", INT)),
    "step/defer": (_STAGE, ("session", INT), ("victim", INT), _POOL, ("by", VICTIM_BY), ("candidates", SERIALS)),
    "step/load": (_STAGE, _POOL, ("session", INT), ("units", REAL), ("computed", REAL), ("due", INT)),
    "step/promote": (_STAGE, ("session", INT), ("left", REAL)),
    "step/promote-stop": (_STAGE, ("session", INT)),
    "offload/land": (_STAGE, ("iteration", INT), ("stores", INT), ("loads", INT)),
    "offload/lookup": (_STAGE, ("session", INT), ("local", INT), ("chunks", INT), ("wait", BOOL)),
    "offload/wait": (_STAGE, ("session", INT), ("why", WAIT_WHY)),
    "offload/park": (_STAGE, ("session", INT), ("chunks", INT), ("due", INT)),
    "offload/reload": (_STAGE, ("session", INT), ("chunks", INT), ("wait", BOOL), ("due", INT)),
    "offload/store": (_STAGE, ("iteration", INT), ("offered", INT), ("stored", INT), ("evicted", INT),
                      ("dropped", INT), ("flushed", INT), ("finished", INT)),
}

#: the rules whose record starts a job (and names it)
ENTERS = frozenset(("stage/fifo-enter", "stage/ps-enter", "stage/delay-enter", "stage/flow-enter", "stage/step-enter"))


# -- values ---------------------------------------------------------------------------------


def _real(value):
    if type(value) is not float:
        value = float(value)
    if value - value == 0.0:  # finite
        return value
    return "nan" if value != value else ("inf" if value > 0 else "-inf")


def _int(value):
    if type(value) is float and value.is_integer():
        return int(value)
    return value


def _key(values):
    return [_real(v) for v in values]


def _plain(value):
    """A value of an unknown field, made strict JSON (non-finite floats as strings)."""
    if isinstance(value, float) and not math.isfinite(value):
        return "nan" if value != value else ("inf" if value > 0 else "-inf")
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


class Tracer:
    """Turns the rules' reports into records (one Tracer per run): the
    fields in ``FIELDS`` order with their one type, jobs by their names.

    It sees every report of the run, from its start (a trace that prints
    only the rules from some time on still names a job by its ordinal in the
    whole run)."""

    def __init__(self):
        self.names: dict[int, str] = {}  # the run's job id -> its name
        self.owners: dict[int, int | None] = {}  # the run's job id -> its session
        self.runs: dict[int, int] = {}  # session -> how many jobs it has started
        self.spills: dict[str, int] = {}  # pool -> how many spill writes it has started
        self.write: str | None = None  # the name of the last spill write started or completed
        self.convert = {
            INT: _int, REAL: _real, BOOL: bool, NAME: str, STAGE_OR_FLOW: str,
            SESSION_OR_NULL: lambda v: None if v is None else _int(v),
            JOB: self.job, JOBS: lambda v: [self.job(j) for j in v],
            NAMES: lambda v: [str(x) for x in v], KEY: _key, KEYS: lambda v: [_key(k) for k in v],
            SERIALS: lambda v: [_int(x) for x in v],
            MODE: str, OUTCOME: str, QUEUE_ORDER: str, EVICT_ORDER: str, SERVE_ORDER: str, VICTIM_BY: str,
            ALLOCATIONS: lambda v: [{"pool": str(p), "units": _real(u)} for p, u in v],
            ADMIT_RUNNER: lambda v: None if v is None else {"session": _int(v[0]), "key": _key(v[1])},
            EVICT_RUNNER: lambda v: None if v is None else {"source": _int(v[0]), "released": _real(v[1]),
                                                             "key": _key(v[2])},
            SERVE_RUNNER: lambda v: None if v is None else {"session": _int(v[0]), "job": self.job(v[1]),
                                                             "key": _key(v[2])},
        }
        self.specs = self._specs()
        #: what a rule's report needs from the run's history before it is a record (the jobs' names)
        self.hooks = {rule: self._start for rule in ENTERS}
        self.hooks.update({"pool/spill": self._spill, "pool/spill-land": self._land, "stage/leave": self._leave})
        self.hooks.update((rule, self._complete) for rule in FIELDS if rule.endswith("-complete"))

    def job(self, job_id) -> str:
        name = self.names.get(job_id)
        return name if name is not None else f"?{job_id}"  # a job the tracer never saw start: the schema refuses it

    def _specs(self) -> dict:
        """Per rule, its fields with their conversions (None: the value is kept as it is)."""
        keep = (NAME, STAGE_OR_FLOW, BOOL, MODE, OUTCOME, QUEUE_ORDER, EVICT_ORDER, SERVE_ORDER, VICTIM_BY, WAIT_WHY)
        return {rule: tuple((name, None if kind in keep or name == "write" else self.convert[kind])  # write: named here
                            for name, kind in spec)
                for rule, spec in FIELDS.items()}

    def record(self, rule: str, time: float, fields: dict) -> dict:
        hook = self.hooks.get(rule)
        if hook is not None:
            fields = hook(rule, fields)
        record = {"rule": rule, "time": _real(time)}
        spec = self.specs.get(rule)
        if spec is None:  # a rule the format does not know: its fields as they are (the schema refuses it)
            record.update((k, _plain(v)) for k, v in fields.items())
            return record
        for name, convert in spec:
            if name in fields:
                value = fields[name]
                record[name] = value if convert is None else convert(value)
        if len(record) != len(fields) + 2:  # a field the format does not define: kept, so that the schema refuses it
            for name in fields:
                if name not in record:
                    record[name] = _plain(fields[name])
        return record

    def _spill(self, rule: str, fields: dict) -> dict:
        pool = fields["pool"]
        n = self.spills[pool] = self.spills.get(pool, 0) + 1
        self.write = f"{pool}/spill/{n}"
        return {**fields, "write": self.write}

    def _land(self, rule: str, fields: dict) -> dict:
        return {**fields, "write": self.write}

    def _leave(self, rule: str, fields: dict) -> dict:
        return {**fields, "session": self.owners.get(fields["job"])}

    def _complete(self, rule: str, fields: dict) -> dict:
        if fields.get("session") is None and fields.get("job") in self.names:
            self.write = self.names[fields["job"]]  # a spill write done: its landing follows
        return fields

    def _start(self, rule: str, fields: dict) -> dict:
        job_id, owner = fields["job"], fields.get("session")
        if owner is None:
            name = self.write if self.write is not None else f"?{job_id}"
        else:
            n = self.runs[owner] = self.runs.get(owner, 0) + 1
            name = f"{owner}/{n}"
        self.names[job_id] = name
        self.owners[job_id] = owner
        return fields


# -- the schema ----------------------------------------------------------------------------------

_JOB_PATTERN = r"^([0-9]+/[1-9][0-9]*|[A-Za-z_][A-Za-z0-9_]*(\[[0-9]+\])?/spill/[1-9][0-9]*)$"


def _fragment(kind: str) -> dict:
    ref_real = {"$ref": "#/$defs/real"}
    ref_key = {"$ref": "#/$defs/key"}
    ref_job = {"$ref": "#/$defs/job"}
    serial = {"$ref": "#/$defs/serial"}
    if kind in _ENUMS:
        return {"enum": list(_ENUMS[kind])}
    return {
        INT: {"type": "integer", "minimum": 0},
        REAL: ref_real,
        BOOL: {"type": "boolean"},
        NAME: {"type": "string", "minLength": 1},
        STAGE_OR_FLOW: {"type": "string", "minLength": 1},
        SESSION_OR_NULL: {"anyOf": [serial, {"type": "null"}]},
        JOB: ref_job,
        JOBS: {"type": "array", "items": ref_job},
        NAMES: {"type": "array", "items": {"type": "string", "minLength": 1}, "minItems": 1},
        KEY: ref_key,
        KEYS: {"type": "array", "items": ref_key},
        SERIALS: {"type": "array", "items": serial, "minItems": 1},
        ALLOCATIONS: {"type": "array", "minItems": 1, "items": {
            "type": "object", "additionalProperties": False, "required": ["pool", "units"],
            "properties": {"pool": {"type": "string", "minLength": 1}, "units": ref_real}}},
        ADMIT_RUNNER: {"anyOf": [{"type": "null"}, {
            "type": "object", "additionalProperties": False, "required": ["session", "key"],
            "properties": {"session": serial, "key": ref_key}}]},
        EVICT_RUNNER: {"anyOf": [{"type": "null"}, {
            "type": "object", "additionalProperties": False, "required": ["source", "released", "key"],
            "properties": {"source": serial, "released": ref_real, "key": ref_key}}]},
        SERVE_RUNNER: {"anyOf": [{"type": "null"}, {
            "type": "object", "additionalProperties": False, "required": ["session", "job", "key"],
            "properties": {"session": serial, "job": ref_job, "key": ref_key}}]},
    }[kind]


def schema() -> dict:
    """The JSON Schema (draft 2020-12) of a trace's lines: the header or one record, each rule's record
    with exactly its fields (ir_schema/steptrace.schema.json is this, written out)."""
    defs: dict = {
        "real": {"description": "a float; a non-finite one is the string inf, -inf or nan",
                 "anyOf": [{"type": "number"}, {"enum": ["inf", "-inf", "nan"]}]},
        "serial": {"description": "a session's serial", "type": "integer", "minimum": 0},
        "key": {"description": "the values of a choice's keys, in the order the program writes them",
                "type": "array", "items": {"$ref": "#/$defs/real"}},
        "job": {"description": "a job: SESSION/N, the N-th job of the session (from 1), or POOL/spill/N, "
                               "the N-th spill write of the pool (from 1)",
                "type": "string", "pattern": _JOB_PATTERN},
        "header": {
            "type": "object", "additionalProperties": False,
            "required": ["format", "version", "serq_ref", "ir", "program", "seed", "horizon", "warmup", "arrivals",
                         "from"],
            "properties": {
                "format": {"const": FORMAT}, "version": {"const": VERSION},
                "serq_ref": {"type": "string"}, "ir": {"type": "integer"},
                "program": {"type": "string", "pattern": "^[0-9a-f]{64}$"},
                "seed": {"type": "integer", "minimum": 0}, "horizon": {"$ref": "#/$defs/real"},
                "warmup": {"$ref": "#/$defs/real"},
                "arrivals": {"anyOf": [{"type": "integer", "minimum": 1}, {"type": "null"}]},
                "from": {"$ref": "#/$defs/real"}}},
    }
    cases = []
    for rule, spec in FIELDS.items():
        name = "rule." + rule.replace("/", ".")  # a JSON pointer reads "/" as a step
        properties = {"rule": {"const": rule}, "time": {"$ref": "#/$defs/real"}}
        properties.update((field, _fragment(kind)) for field, kind in spec)
        defs[name] = {"type": "object", "additionalProperties": False, "required": list(properties),
                      "properties": properties}
        cases.append({"if": {"properties": {"rule": {"const": rule}}, "required": ["rule"]},
                      "then": {"$ref": f"#/$defs/{name}"}})
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": "https://serq-ref.invalid/step-trace/1/steptrace.schema.json",
        "title": "serq-ref step trace, format version 1",
        "description": "One line of `serq-ref trace` output: the header (its first line), or the record of one "
                       "applied rule, with exactly the fields docs/step-trace.md defines for it.",
        "$defs": defs,
        "anyOf": [
            {"$ref": "#/$defs/header"},
            {"type": "object", "required": ["rule", "time"],
             "properties": {"rule": {"enum": list(FIELDS)}},
             "allOf": cases},
        ],
    }
