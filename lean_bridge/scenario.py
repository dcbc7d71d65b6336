"""Scenarios and their recorded answers (../shared/oracle/README.md).

A scenario ``NAME.json`` of oracle/vllm or oracle/serve is one vLLM engine
and its requests. Its program is examples/oracle/vllm_request.sq compiled
with the engine's constants (``--set``), the serve order written into the
step stage (``serve by (KEY);``) and the requests as explicit sessions
(prompt, o = out, arrive): exactly the IR the reference compiler wrote to
``NAME.ir.json`` (tests/test_compile_oracle.py; tests/test_lean_emit.py
checks the same of this module). A campaign case, and a scenario with
prefix caching (which vllm_request.sq does not have), is translated from
the program the oracle harness runs: examples/oracle/vllm_scenario.sq on
lib/vllm.sq's engine (oracle.scenario.compile_scenario), on the step clock.
An IR file is read as it is.

The answer is ``NAME.out.json`` beside it: first and done per request, the
total preemptions.
"""

from __future__ import annotations

import dataclasses
import json
import os
from dataclasses import dataclass
from pathlib import Path

from semantics import ir
from semantics.errors import ProgramError, Span
from semantics.sourcemap import SourceMap

from .jsonpos import positions
from .translate import Locator, Translation, translate

#: The program of one vLLM request (seed 002, section 7).
PROGRAM = Path(__file__).resolve().parent.parent / "examples" / "oracle" / "vllm_request.sq"
#: Where the serve order is written into the program's step stage.
SERVE_ANCHOR = "cost 1; memory kv;"
#: Where vLLM 0.33.0's self-preemption rule is written into it.
SELF_PREEMPTION_ANCHOR = "memory kv; }"

Pairs = tuple[tuple[int, int], ...]


@dataclass(frozen=True)
class Answer:
    """A recorded answer: (serial, step) pairs sorted by serial, and the preemptions."""

    firsts: Pairs
    dones: Pairs
    preemptions: int

    def as_tuple(self) -> tuple[Pairs, Pairs, int]:
        return self.firsts, self.dones, self.preemptions


@dataclass(frozen=True)
class Scenario:
    name: str
    path: str
    program: ir.Program
    translation: Translation
    answer: Answer | None
    answer_path: str | None


def base_name(path: str) -> str:
    """``mixed`` for ``…/mixed.json`` and ``…/mixed.ir.json``."""
    name = os.path.basename(path)
    for suffix in (".ir.json", ".json"):
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return name


def read_json(path: str) -> tuple[object, str]:
    from semantics.textfile import read_text  # a program's file reader: no UTF-8 is a located error, not a crash

    text = read_text(path)
    try:
        return json.loads(text), text
    except json.JSONDecodeError as e:
        raise ProgramError(f"not JSON: {e.msg}", Span(path, e.lineno, e.colno)) from None


def read_answer(path: str) -> Answer:
    """``NAME.out.json``: first/done by request id, and preemptions."""
    data, text = read_json(path)
    where = positions(text)

    def at(*key) -> Span | None:
        line_col = where.get(key)
        return Span(path, *line_col) if line_col else None

    try:
        return answer_of(data)
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        raise ProgramError(f"not a recorded answer ({{first: {{id: step}}, done: {{id: step}}, preemptions: n}}): {e}",
                           at(), file=path) from None


def answer_of(data: dict) -> Answer:
    """A recorded answer's first/done by request id and preemptions (the
    other fields of a campaign answer, steps, status, features, are not compared)."""
    firsts = tuple(sorted((int(k), int(v)) for k, v in data["first"].items()))
    dones = tuple(sorted((int(k), int(v)) for k, v in data["done"].items()))
    return Answer(firsts, dones, int(data["preemptions"]))


def answer_beside(path: str) -> str | None:
    candidate = os.path.join(os.path.dirname(path), base_name(path) + ".out.json")
    return candidate if os.path.exists(candidate) else None


def is_ir(data: object) -> bool:
    return isinstance(data, dict) and "version" in data


def continues_for(path: str, older_rule: bool | None = None) -> bool:
    """Whether a scenario of the file ``path`` runs under vLLM 0.33.0's
    self-preemption rule (the pass continues): ``older_rule`` when given,
    else the rule of the vLLM its corpus was recorded on, as the oracle
    harness decides it (oracle.scenario.older_rule_for: ../shared/oracle the
    older revision's, oracle/data 0.33.0's)."""
    from oracle.scenario import older_rule_for

    return not older_rule_for(path, older_rule)


def load(path: str, older_rule: bool | None = None) -> Scenario:
    """A scenario or an IR file, translated into the fragment (a located
    ProgramError when it is outside), with its recorded answer if there is one.
    A scenario runs under the self-preemption rule of its corpus (``continues_for``);
    an IR file under its own."""
    data, text = read_json(path)
    if is_ir(data):
        program = load_ir(path)
        translation = translate(program, Locator.for_json(path, text))
    else:
        program, locator = _program(path, data, text, continues_for(path, older_rule))
        translation = translate(program, locator)
    answer_path = answer_beside(path)
    answer = read_answer(answer_path) if answer_path else None
    return Scenario(base_name(path), path, program, translation, answer, answer_path)


def load_case(label: str, data: dict, answer: dict, continues: bool) -> Scenario:
    """A campaign case (one line of a campaign file: its ``case`` without
    ``kind``, and an answer of it), labelled ``label`` (FILE.jsonl#INDEX),
    under the self-preemption rule ``continues``. Locations are in the case's
    JSON as ``json.dumps`` writes it; the program is the oracle harness's."""
    text = json.dumps(data)
    program, locator = _program(label, data, text, continues, harness=True)
    translation = translate(program, locator)
    try:
        recorded = answer_of(answer)
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        raise ProgramError(f"not a recorded answer ({{first: {{id: step}}, done: {{id: step}}, preemptions: n}}): {e}",
                           file=label) from None
    return Scenario(label, label, program, translation, recorded, label)


def load_ir(path: str) -> ir.Program:
    """An IR file, through the project's one loader (schema, codec, link)."""
    from semantics.pipeline import load as load_program

    return load_program(path).program


_REQUIRED = ("budget", "max_seqs", "block_size", "num_blocks", "requests")
_OPTIONAL = ("chunk", "prefix_caching", "serve")


def _program(path: str, data: object, text: str, continues: bool,
             harness: bool = False) -> tuple[ir.Program, Locator]:
    """A scenario's program and where the translation locates what it refuses:
    the harness's program (``harness_program``) for a campaign case
    (``harness``) and for a scenario with prefix caching, vllm_request.sq
    (``scenario_program``) for the others."""
    if harness or (isinstance(data, dict) and data.get("prefix_caching")):
        return harness_program(path, data, text, continues)
    program, smap = scenario_program(path, data, text, continues)
    return program, _at_the_key(program, Locator.for_source(smap), _validate(path, data, text), spliced=False)


def _at_the_key(program: ir.Program, source: Locator, at, spliced: bool) -> Locator:
    """``source``, but what lies in the step engine's serve key is located at
    the scenario's ``serve`` (the key is the scenario's text written into the
    program's); ``spliced``: the program's other lines are not its file's
    (the harness's program with a serve key), so they are located by IR path."""
    engine = next(k for k, s in enumerate(program.stages) if isinstance(s.kind, ir.Step))

    def find(node: tuple) -> Span | None:
        if node[:5] == ("stages", engine, "kind", "Step", "serve"):
            return at("serve")
        return None if spliced else source.find(node)

    return Locator(at().file if spliced else source.file, find)


def harness_program(path: str, data: object, text: str, continues: bool = False) -> tuple[ir.Program, Locator]:
    """The program ``serq-ref oracle check`` runs for the scenario: lib/vllm.sq's
    engine on the step clock through examples/oracle/vllm_scenario.sq
    (oracle.scenario.compile_scenario), with ``older_rule`` set unless
    ``continues``. It has what vllm_request.sq leaves out: prefix caching (a
    cache clause, reuse and the admission's lookup of the request's own
    cached prefix) and vLLM 0.33.0's first chunk, clamped by the long-prefill
    threshold while another request runs or waits, then by the budget
    (scheduler.py:1332-1346 and :1449). What the translation refuses in it is
    located at the scenario's serve key when it is in the key, else by the
    program's source map (with a serve key the library is spliced into the
    scenario program's text, so only the key has a place to point at)."""
    from oracle.scenario import compile_scenario

    at = _validate(path, data, text)
    try:
        program, smap = compile_scenario(data, path, older_rule=not continues)
    except ProgramError as e:
        if "serve" in data:
            raise ProgramError(f"the scenario's serve key `{data['serve']}` does not compile: "
                               f"{e.message.split(' does not compile: ', 1)[-1]}", at("serve")) from None
        raise
    return program, _at_the_key(program, Locator.for_source(smap), at, spliced="serve" in data)


def _validate(path: str, data: object, text: str):
    """A ProgramError at the JSON node of what makes ``data`` no scenario;
    else the function from a JSON key path to its Span."""
    where = positions(text)

    def at(*key) -> Span:
        for n in range(len(key), -1, -1):
            if key[:n] in where:
                return Span(path, *where[key[:n]])
        return Span(path, 1, 1)

    if not isinstance(data, dict):
        raise ProgramError("a scenario is a JSON object {budget, max_seqs, block_size, num_blocks, requests, …}", at())
    for key in _REQUIRED:
        if key not in data:
            raise ProgramError(f"the scenario has no `{key}`", at())
    for key in data:
        if key not in _REQUIRED + _OPTIONAL:
            raise ProgramError(f"`{key}` is not a field of a scenario (fields: {', '.join(_REQUIRED + _OPTIONAL)})",
                               at(key))

    def natural(value: object, *key) -> float:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0 or not float(value).is_integer():
            raise ProgramError(f"`{key[-1]}` is {json.dumps(value)}, not a natural number", at(*key))
        return float(value)

    for key in ("block_size", "budget", "max_seqs", "chunk"):
        natural(data.get(key, 0), key)
    if natural(data["num_blocks"], "num_blocks") < 2:
        raise ProgramError("`num_blocks` counts vLLM's null block: at least 2", at("num_blocks"))
    if "serve" in data and not isinstance(data["serve"], str):
        raise ProgramError("`serve` is a serve-by key in serQ syntax", at("serve"))
    if not isinstance(data["requests"], list) or not data["requests"]:
        raise ProgramError("`requests` is a non-empty list of {prompt, out, arrive?}", at("requests"))
    for k, r in enumerate(data["requests"]):
        if not isinstance(r, dict) or "prompt" not in r or "out" not in r:
            raise ProgramError("a request is {prompt, out, arrive?}", at("requests", k))
        for key in ("prompt", "out", "arrive"):
            natural(r.get(key, 0), "requests", k, key)
    return at


def scenario_program(path: str, data: object, text: str, continues: bool = False) -> tuple[ir.Program, SourceMap]:
    """The IR of a scenario without prefix caching: vllm_request.sq with its
    engine and requests; ``continues``: with ``self preemption continue;`` in
    its step stage (vLLM 0.33.0's rule; without it, the older revision's)."""
    from semantics.compiler import compile_source
    from semantics.link import link

    at = _validate(path, data, text)
    if data.get("prefix_caching"):
        raise AssertionError("a scenario with prefix caching is the harness's program (harness_program)")
    sets = {"bs": float(data["block_size"]), "B": float(data["budget"]), "blocks": float(data["num_blocks"]) - 1,
            "max_seqs": float(data["max_seqs"]), "chunk": float(data.get("chunk", 0))}
    program_text = PROGRAM.read_text(encoding="utf-8")
    if "serve" in data:
        if SERVE_ANCHOR not in program_text:
            raise AssertionError(f"{PROGRAM} no longer has `{SERVE_ANCHOR}`")
        program_text = program_text.replace(SERVE_ANCHOR, f"cost 1; serve by ({data['serve']}); memory kv;")
    if continues:
        if SELF_PREEMPTION_ANCHOR not in program_text:
            raise AssertionError(f"{PROGRAM} no longer has `{SELF_PREEMPTION_ANCHOR}`")
        program_text = program_text.replace(SELF_PREEMPTION_ANCHOR, "memory kv; self preemption continue; }")
    try:
        program, smap = compile_source(program_text, str(PROGRAM), sets=sets)
    except ProgramError as e:
        if "serve" in data:
            raise ProgramError(f"the scenario's serve key `{data['serve']}` does not compile: {e.message}",
                               at("serve")) from None
        raise
    slot = {name: program.attrs.index(name) for name in ("prompt", "o", "arrive")}
    specs = tuple(ir.SessionSpec(((slot["prompt"], float(r["prompt"])), (slot["o"], float(r["out"])),
                                  (slot["arrive"], float(r.get("arrive", 0)))), None)
                  for r in data["requests"])
    program = dataclasses.replace(program, arrival=ir.Sessions(specs))
    link(program, smap)
    return program, smap


def scenarios_in(directory: str) -> list[str]:
    """Every ``NAME.json`` in ``directory`` with a recorded answer ``NAME.out.json``, by name: the cases
    ``oracle check`` takes there but the IR files."""
    from oracle.scenario import cases_in

    return [path for path in cases_in(directory) if not path.endswith(".ir.json")]
