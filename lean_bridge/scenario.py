"""Scenarios and their recorded answers (../shared/oracle/README.md).

A scenario ``NAME.json`` of oracle/vllm or oracle/serve is one vLLM engine
and its requests. Its program is the one-request program
(oracle.scenario.request_program): examples/oracle/vllm_request.sq compiled
with the engine's constants (``--set``), the serve order written into the
step stage (``serve by (KEY);``) and the requests as explicit sessions
(prompt, o = out, arrive): exactly the IR the reference compiler wrote to
``NAME.ir.json`` (tests/test_compile_oracle.py; tests/test_lean_emit.py
checks the same of the builder). A campaign case, and a scenario with
prefix caching (which vllm_request.sq does not have), is translated from
the program the oracle harness runs: examples/oracle/vllm_scenario.sq on
lib/vllm.sq's engine (oracle.scenario.compile_scenario), on the step clock.
Both builders check the scenario (oracle.scenario.check_scenario), locating
what is wrong at its JSON node. An IR file is read as it is.

The answer is ``NAME.out.json`` beside it: first and done per request, the
total preemptions.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass

from oracle.scenario import cases_in, compile_scenario, older_rule_for, read_json_text, request_program
from semantics import ir
from semantics.errors import ProgramError, Span
from semantics.jsonpos import positions

from .translate import Locator, Translation, translate

Pairs = tuple[tuple[int, int], ...]


#: The oracle harness's observations, in the fragment's numbering: the first token (0), the finish (1) and
#: why a request was refused (2: 1 configuration, 2 prompt, 3 never fits; oracle.scenario.REFUSALS).
OBSERVES = ("ttft", "done", "refused")


@dataclass(frozen=True)
class Answer:
    """A recorded answer: (serial, step) pairs sorted by serial, the
    preemptions, and (serial, code) of every refused request (the code of
    oracle.scenario.REFUSALS whose reason the answer gives; 0 for a reason
    none of them gives)."""

    firsts: Pairs
    dones: Pairs
    preemptions: int
    refused: Pairs = ()

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


def observe_order(program: ir.Program) -> tuple[str, ...]:
    """The harness's program's observations in the fragment's numbering
    (``OBSERVES``: with refusals written in, `refused` is the IR's first);
    another program's (vllm_request.sq's `first` and `done`) as they are."""
    return OBSERVES if OBSERVES[0] in program.observes else ()


def base_name(path: str) -> str:
    """``mixed`` for ``…/mixed.json`` and ``…/mixed.ir.json``."""
    name = os.path.basename(path)
    for suffix in (".ir.json", ".json"):
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return name


def read_answer(path: str) -> Answer:
    """``NAME.out.json``: first/done by request id, and preemptions."""
    data, text = read_json_text(path)
    where = positions(text)

    def at(*key) -> Span | None:
        line_col = where.get(key)
        return Span(path, *line_col) if line_col else None

    try:
        return answer_of(data)
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        raise ProgramError(f"not a recorded answer ({{first: {{id: step}}, done: {{id: step}}, preemptions: n}}): {e}",
                           at(), file=path) from None


def answer_of(data: dict, scenario: dict | None = None) -> Answer:
    """A recorded answer's first/done by request id, preemptions and refusals
    (each reason read back as the code whose text, written from
    ``scenario``'s numbers, it is: oracle.scenario.REFUSALS); the other
    fields of a campaign answer, steps, status, features, are not compared."""
    firsts = tuple(sorted((int(k), int(v)) for k, v in data["first"].items()))
    dones = tuple(sorted((int(k), int(v)) for k, v in data["done"].items()))
    refused = tuple(sorted((int(k), refusal_code(scenario, int(k), why))
                           for k, why in data.get("refused", {}).items()))
    return Answer(firsts, dones, int(data["preemptions"]), refused)


def refusal_code(scenario: dict | None, serial: int, why: str) -> int:
    """The code of oracle.scenario.REFUSALS whose reason for the request is ``why`` (0: none)."""
    from oracle.scenario import REFUSALS

    if scenario is None:
        return 0
    for code, reason in REFUSALS.items():
        if reason(scenario, scenario["requests"][serial]) == why:
            return code
    return 0


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
    return not older_rule_for(path, older_rule)


def load(path: str, older_rule: bool | None = None) -> Scenario:
    """A scenario or an IR file, translated into the fragment (a located
    ProgramError when it is outside), with its recorded answer if there is one.
    A scenario runs under the self-preemption rule of its corpus (``continues_for``);
    an IR file under its own."""
    data, text = read_json_text(path)
    if is_ir(data):
        program = load_ir(path)
        translation = translate(program, Locator.for_json(path, text))
    else:
        program, locator = _program(path, data, text, continues_for(path, older_rule))
        translation = translate(program, locator, observe_order(program))
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
    translation = translate(program, locator, observe_order(program))
    try:
        recorded = answer_of(answer, data)
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        raise ProgramError(f"not a recorded answer ({{first: {{id: step}}, done: {{id: step}}, preemptions: n}}): {e}",
                           file=label) from None
    return Scenario(label, label, program, translation, recorded, label)


def load_ir(path: str) -> ir.Program:
    """An IR file, through the project's one loader (schema, codec, link)."""
    from semantics.pipeline import load as load_program

    return load_program(path).program


def _program(path: str, data: object, text: str, continues: bool,
             harness: bool = False) -> tuple[ir.Program, Locator]:
    """A scenario's program and where the translation locates what it refuses:
    the harness's program (``harness_program``) for a campaign case
    (``harness``) and for a scenario with prefix caching, vllm_request.sq
    (oracle.scenario.request_program) for the others."""
    if harness or (isinstance(data, dict) and data.get("prefix_caching")):
        return harness_program(path, data, text, continues)
    built = request_program(data, path, text, continues)
    return built.program, _at_the_key(built.program, Locator.for_source(built.smap), built.at, spliced=False)


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
    built = compile_scenario(data, path, older_rule=not continues, text=text)
    return built.program, _at_the_key(built.program, Locator.for_source(built.smap), built.at,
                                      spliced="serve" in data)


def scenarios_in(directory: str) -> list[str]:
    """Every ``NAME.json`` in ``directory`` with a recorded answer ``NAME.out.json``, by name: the cases
    ``oracle check`` takes there but the IR files."""
    return [path for path in cases_in(directory) if not path.endswith(".ir.json")]
