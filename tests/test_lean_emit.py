"""`serq-ref lean`: scenarios and IR files as Lean theorems, and the
refusal, located, of what lies outside the fragment.

Issue 11: "prints a Lean 4 file: the program as a term of that type, and one
theorem `outcome … = (firsts, dones, preemptions) := by decide` whose
right-hand side is the scenario's recorded answer, each list of (serial,
step) pairs sorted by serial"; "The translation refuses what lies outside
the fragment with a message naming the construct and where it is."
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from oracle.scenario import request_program
from semantics import codec
from semantics.cli import main
from shared_paths import SHARED

ROOT = Path(__file__).resolve().parent.parent
LEAN = ROOT / "lean_bridge" / "lean"
GROUPS = {"vllm": ("alone", "chunked", "hol", "longchunk", "mixed", "preempt", "seqcap"),
          "serve": ("admission", "newest_first", "newest_first_preempt", "prefill_first")}
THEOREM = re.compile(r"theorem recorded : outcome program (\d+) =\s+\((\[.*?\]), (\[.*?\]), (\d+)\) := by\n"
                     r"  decide \+kernel\n")


def run_cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def recorded(group: str, name: str) -> tuple[list, list, int]:
    data = json.loads((SHARED / "oracle" / group / f"{name}.out.json").read_text())
    firsts = sorted((int(k), v) for k, v in data["first"].items())
    dones = sorted((int(k), v) for k, v in data["done"].items())
    return firsts, dones, data["preemptions"]


def theorem_of(text: str) -> tuple[int, list, list, int]:
    match = THEOREM.search(text)
    assert match, text[-600:]
    pairs = lambda s: [tuple(map(int, x)) for x in re.findall(r"\((\d+), (\d+)\)", s)]  # noqa: E731
    return int(match[1]), pairs(match[2]), pairs(match[3]), int(match[4])


@pytest.mark.parametrize("group,name", [(g, n) for g, names in GROUPS.items() for n in names])
def test_the_scenario_program_is_the_reference_compilers_ir(group: str, name: str) -> None:
    """The scenario's program the bridge translates (the one-request program,
    oracle.scenario.request_program) is NAME.ir.json byte for byte."""
    path = SHARED / "oracle" / group / f"{name}.json"
    text = path.read_text()
    program = request_program(json.loads(text), str(path), text).program
    assert codec.dumps(program) == (SHARED / "oracle" / group / f"{name}.ir.json").read_text()


@pytest.mark.parametrize("group", GROUPS)
def test_every_theorem_states_the_recorded_answer(group: str, tmp_path, capsys) -> None:
    out = tmp_path / group
    code, stdout, _ = run_cli(capsys, "lean", str(SHARED / "oracle" / group), "--out", str(out))
    assert code == 0, stdout
    for name in GROUPS[group]:
        text = (out / f"{scenario_module(name)}.lean").read_text()
        fuel, firsts, dones, preemptions = theorem_of(text)
        assert (firsts, dones, preemptions) == recorded(group, name)
        assert firsts == sorted(firsts) and dones == sorted(dones)
        assert fuel > 0
        assert text.startswith("-- Generated") and "\nimport SerqRef\n" in text
        assert "def program : Program :=" in text
    all_module = (out / "All.lean").read_text()
    assert all(f"import {group.capitalize()}.{scenario_module(n)}\n" in all_module for n in GROUPS[group])


def scenario_module(name: str) -> str:
    return "".join(p.capitalize() for p in name.split("_"))


@pytest.mark.parametrize("group", GROUPS)
def test_the_committed_theorems_are_what_the_emitter_writes(group: str, tmp_path, capsys) -> None:
    """lean_bridge/lean/SerqRefOracle is the emitter's output, not a hand edit."""
    out = tmp_path / group
    prefix = f"SerqRefOracle.{group.capitalize()}"
    code, _, _ = run_cli(capsys, "lean", str(SHARED / "oracle" / group), "--out", str(out), "--module", prefix)
    assert code == 0
    committed = LEAN / "SerqRefOracle" / group.capitalize()
    names = sorted(p.name for p in out.iterdir())
    assert names == sorted(p.name for p in committed.iterdir())
    for name in names:
        assert (out / name).read_text() == (committed / name).read_text(), name


def test_the_committed_campaign_theorems_are_what_the_emitter_writes(tmp_path, capsys) -> None:
    """SerqRefOracle/Campaign: cases of vLLM 0.33.0's campaign, prefix caching
    among them (lean_bridge/lean/SerqRefOracle.lean says which and how)."""
    out = tmp_path / "Campaign"
    code, _, err = run_cli(capsys, "lean", str(DATA / "campaign" / "scenarios.jsonl"), "--out", str(out),
                           "--module", "SerqRefOracle.Campaign", "--every", "500", "--cases", "212,220,282,3971")
    assert code == 0 and err == ""
    committed = LEAN / "SerqRefOracle" / "Campaign"
    names = sorted(p.name for p in out.iterdir())
    assert names == sorted(p.name for p in committed.iterdir()) and len(names) == 15
    for name in names:
        assert (out / name).read_text() == (committed / name).read_text(), name
    assert sum(".cachedIn" in (out / name).read_text() and "(.mul (.num 1) (.max" in (out / name).read_text()
               for name in names) == 9  # prefix_caching 1: five of every 500th, and the four named


def test_the_module_prefix_is_the_path_below_the_lakefile(tmp_path, capsys) -> None:
    (tmp_path / "lakefile.lean").write_text("-- a package\n")
    out = tmp_path / "Oracle" / "Vllm"
    code, stdout, _ = run_cli(capsys, "lean", str(SHARED / "oracle" / "vllm"), "--out", str(out))
    assert code == 0 and "Oracle.Vllm.All" in stdout
    assert "namespace Oracle.Vllm.Hol\n" in (out / "Hol.lean").read_text()
    assert "import Oracle.Vllm.Hol\n" in (out / "All.lean").read_text()


def test_a_scenario_prints_one_lean_file(capsys) -> None:
    code, out, _ = run_cli(capsys, "lean", str(SHARED / "oracle" / "vllm" / "preempt.json"))
    assert code == 0
    _, firsts, dones, preemptions = theorem_of(out)
    assert (firsts, dones, preemptions) == ([(0, 1), (1, 31)], [(0, 30), (1, 60)], 1)
    assert "namespace SerqRefOracle.Preempt" in out and out.rstrip().endswith("end SerqRefOracle.Preempt")
    # the program as a term: the hold on reqs and kv, the growing runs, the gate
    assert ".hold [{ pool := 0 /- reqs -/, units := (.num 1), reserve := none }" in out
    assert ".step .prefill (.attr 12 /- known -/) (some 1 /- kv -/)" in out
    assert ".delay 1 /- gate -/ (.attr 11 /- arrive -/)" in out
    assert "{ cap := 10, block := 16, lifo := true, viaEngine := false }" in out


def test_an_ir_file_beside_its_answer_gives_the_same_theorem(capsys) -> None:
    _, from_scenario, _ = run_cli(capsys, "lean", str(SHARED / "oracle" / "serve" / "newest_first_preempt.json"))
    _, from_ir, _ = run_cli(capsys, "lean", str(SHARED / "oracle" / "serve" / "newest_first_preempt.ir.json"))
    strip = lambda t: t.split("\n", 1)[1]  # noqa: E731  (the header names the file)
    assert strip(from_scenario) == strip(from_ir)


def test_without_a_recorded_answer_the_mirror_answer_is_asked_for(tmp_path, capsys) -> None:
    ir_file = tmp_path / "alone_copy.ir.json"
    ir_file.write_text((SHARED / "oracle" / "vllm" / "hol.ir.json").read_text())
    code, _, err = run_cli(capsys, "lean", str(ir_file))
    assert code == 1 and "no recorded answer alone_copy.out.json" in err
    code, out, _ = run_cli(capsys, "lean", str(ir_file), "--answer", "mirror")
    assert code == 0 and "The mirror's outcome" in out
    assert theorem_of(out)[1:] == tuple(recorded("vllm", "hol"))


# -- refusals -------------------------------------------------------------------------


def mutated_ir(tmp_path: Path, change) -> tuple[Path, list[str]]:
    data = json.loads((SHARED / "oracle" / "vllm" / "preempt.ir.json").read_text())
    change(data)
    text = json.dumps(data, indent=2) + "\n"
    path = tmp_path / "changed.ir.json"
    path.write_text(text)
    return path, text.splitlines()


def located(err: str, path: Path) -> tuple[int, int, str]:
    match = re.match(rf"{re.escape(str(path))}:(\d+):(\d+): error: (.*)", err)
    assert match, err
    return int(match[1]), int(match[2]), match[3]


def test_a_fifo_stage_is_refused_at_its_place(tmp_path, capsys) -> None:
    def change(data):
        data["stages"][1]["kind"] = {"Fifo": 1}

    path, lines = mutated_ir(tmp_path, change)
    code, _, err = run_cli(capsys, "lean", str(path))
    assert code == 1
    line, col, message = located(err, path)
    assert "outside the Lean fragment" in message and "fifo stage gate" in message
    assert '"kind"' in lines[line - 1] and lines[line - 1][col - 1] == "{" and '"Fifo"' in lines[line]


def test_a_draw_is_refused_at_the_statement(tmp_path, capsys) -> None:
    def change(data):
        data["blocks"][3][0]["Set"][1] = {"Sample": ["Exp", [{"Num": 1.0}]]}

    path, lines = mutated_ir(tmp_path, change)
    code, _, err = run_cli(capsys, "lean", str(path))
    line, col, message = located(err, path)
    assert code == 1 and "a draw `~exp(…)`" in message
    assert lines[line - 1][col - 1] == "{" and '"Sample"' in lines[line]


def test_an_arrival_process_is_refused(tmp_path, capsys) -> None:
    def change(data):
        data["arrival"] = {"Poisson": 1.0}

    path, lines = mutated_ir(tmp_path, change)
    code, _, err = run_cli(capsys, "lean", str(path))
    line, _, message = located(err, path)
    assert code == 1 and "an arrival process" in message
    assert '"arrival"' in lines[line - 1] and "Poisson" in lines[line - 1] + lines[line]


def test_a_cost_other_than_one_is_refused(tmp_path, capsys) -> None:
    def change(data):
        data["stages"][0]["kind"]["Step"]["cost"] = {"Num": 2.0}

    path, lines = mutated_ir(tmp_path, change)
    code, _, err = run_cli(capsys, "lean", str(path))
    line, _, message = located(err, path)
    assert code == 1 and "iteration cost other than 1" in message
    assert '"cost"' in lines[line - 1]


def test_a_fraction_is_refused(tmp_path, capsys) -> None:
    def change(data):
        data["blocks"][0][0]["Set"][1] = {"Num": 0.5}

    path, _ = mutated_ir(tmp_path, change)
    code, _, err = run_cli(capsys, "lean", str(path))
    assert code == 1 and "0.5 is not a natural number" in located(err, path)[2]


#: scenarios.jsonl#212 (vLLM 0.33.0's answer: first 26 and 4, done 61 and 43, one preemption): the
#: preempted request finds two blocks of its own prefix cached and is done two steps sooner than without.
CACHED = {"budget": 24, "max_seqs": 4, "block_size": 16, "num_blocks": 8, "chunk": 0, "prefix_caching": True,
          "requests": [{"prompt": 39, "out": 32, "arrive": 24}, {"prompt": 13, "out": 40, "arrive": 3}]}


def test_a_scenario_with_prefix_caching_is_the_harness_program(tmp_path, capsys) -> None:
    """vllm_request.sq has no cache: a scenario with prefix caching is
    translated from the program `serq-ref oracle check` runs (lib/vllm.sq's
    engine through vllm_scenario.sq), and the mirror's outcome is the
    harness's answer, with the cache and without it (where they differ)."""
    from oracle.scenario import run_scenario

    theorems = {}
    for caching in (True, False):
        data = dict(CACHED, prefix_caching=caching)
        path = tmp_path / f"cached_{caching}.json"
        path.write_text(json.dumps(data, indent=1))
        code, out, err = run_cli(capsys, "lean", str(path), "--answer", "mirror")
        assert code == 0, err
        _, firsts, dones, preemptions = theorems[caching] = theorem_of(out)
        answer = run_scenario(data)
        assert firsts == sorted((int(k), v) for k, v in answer["first"].items())
        assert dones == sorted((int(k), v) for k, v in answer["done"].items()) and preemptions == answer["preemptions"]
        assert ("/- first_cached -/" in out and ".cachedIn 1 /- kv -/" in out) == caching  # lib/vllm.sq's, or not
    assert theorems[True][2] == [(0, 61), (1, 43)] and theorems[False][2] == [(0, 63), (1, 43)]


def test_a_serve_key_outside_the_fragment_is_refused_at_the_key(tmp_path, capsys) -> None:
    """In the harness's program the library is spliced in with the key: the
    refusal points at the key in the scenario, not into the spliced text."""
    path = tmp_path / "served.json"
    path.write_text('{"budget": 24, "max_seqs": 4, "block_size": 16, "num_blocks": 8, "prefix_caching": true,\n'
                    ' "serve": "free(kv)", "requests": [{"prompt": 39, "out": 3}]}\n')
    code, _, err = run_cli(capsys, "lean", str(path))
    assert code == 1
    line, col, message = located(err, path)
    assert (line, col) == (2, 11) and "the function `free`" in message
    # the JSON file's line and a caret under the key, as a program's error has
    assert err.splitlines()[1:3] == ['   "serve": "free(kv)", "requests": [{"prompt": 39, "out": 3}]}',
                                     "            ^"]


def test_a_compiled_program_is_refused_at_its_source_line(tmp_path) -> None:
    """A program from serQ text: the refusal is at the statement's span in the .sq file."""
    import dataclasses

    from lean_bridge.translate import Locator, translate
    from semantics import ir
    from semantics.compiler import compile_source
    from semantics.errors import ProgramError

    text = (PROGRAM := (ROOT / "examples" / "oracle" / "vllm_request.sq").read_text())
    text = text.replace("    decode (o - 1 - (known - prompt)) growing kv;",
                        "    decode (o - 1 - (known - prompt)) growing kv;\n    grow kv (16);")
    program, smap = compile_source(text, "vllm_request_grow.sq")
    program = dataclasses.replace(program, arrival=ir.Sessions((ir.SessionSpec(((9, 80.0),), None),)))
    with pytest.raises(ProgramError) as e:
        translate(program, Locator.for_source(smap))
    assert e.value.span is not None and e.value.span.file == "vllm_request_grow.sq"
    assert text.splitlines()[e.value.span.line - 1].strip() == "grow kv (16);"
    assert "the statement `grow`" in e.value.message
    assert PROGRAM  # the example itself is untouched


# -- the self-preemption rule and the campaign data -----------------------------------------

DATA = Path(__file__).resolve().parent.parent / "oracle" / "data"


def test_each_corpus_is_emitted_under_its_vllms_self_preemption_rule(capsys) -> None:
    """../shared/oracle was recorded on vLLM 0c87a197 (the pass ends),
    oracle/data on 0.33.0 (it continues): the program term says which, and
    each theorem's right-hand side is its corpus's answer (D1's
    newest_first_preempt differs between them)."""
    theorems = {}
    for root, rule in ((SHARED / "oracle", ".ends"), (DATA / "shared", ".continues")):
        code, out, _ = run_cli(capsys, "lean", str(root / "serve" / "newest_first_preempt.json"))
        assert code == 0
        assert f"selfPreemption := {rule} }}," in out
        answer = json.loads((root / "serve" / "newest_first_preempt.out.json").read_text())
        _, firsts, dones, preemptions = theorems[rule] = theorem_of(out)
        assert firsts == sorted((int(k), v) for k, v in answer["first"].items())
        assert dones == sorted((int(k), v) for k, v in answer["done"].items()) and preemptions == answer["preemptions"]
    assert theorems[".ends"][1:] != theorems[".continues"][1:]


def test_a_campaign_file_gives_one_theorem_file_per_case(tmp_path, capsys) -> None:
    """#0 and #300 have prefix caching: their theorems are of the harness's program."""
    out = tmp_path / "Camp"
    code, stdout, err = run_cli(capsys, "lean", str(DATA / "campaign" / "serve.jsonl"), "--out", str(out),
                                "--module", "Camp", "--every", "100", "--limit", "4")
    assert code == 0 and err == ""
    assert stdout.strip() == f"wrote 4 theorem file(s) and Camp.All to {out}"
    assert sorted(p.name for p in out.iterdir()) == ["All.lean", "Case0.lean", "Case100.lean", "Case200.lean",
                                                     "Case300.lean"]
    records = [json.loads(line) for line in (DATA / "campaign" / "serve.jsonl").read_text().splitlines()]
    assert [records[k]["case"]["prefix_caching"] for k in (0, 100, 200, 300)] == [True, False, False, True]
    for index in (0, 100, 200, 300):
        text = (out / f"Case{index}.lean").read_text()
        assert f"from campaign/serve.jsonl#{index};" in text.splitlines()[0]
        assert f"namespace Camp.Case{index}\n" in text and "selfPreemption := .continues }," in text
        answer = records[index]["answer"]
        _, firsts, dones, preemptions = theorem_of(text)
        assert (firsts, dones, preemptions) == (sorted((int(k), v) for k, v in answer["first"].items()),
                                                sorted((int(k), v) for k, v in answer["done"].items()),
                                                answer["preemptions"])
    assert (out / "All.lean").read_text().endswith("import Camp.Case0\nimport Camp.Case100\nimport Camp.Case200\n"
                                                   "import Camp.Case300\n")


def test_a_campaign_case_outside_the_fragment_has_no_theorem_and_is_counted(tmp_path, capsys) -> None:
    records = [json.loads(line) for line in (DATA / "campaign" / "serve.jsonl").read_text().splitlines()[:2]]
    records[1]["case"]["serve"] = "free(kv)"
    path = tmp_path / "serve.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    out = tmp_path / "Camp"
    code, stdout, err = run_cli(capsys, "lean", str(path), "--out", str(out), "--module", "Camp")
    assert code == 0 and stdout.strip() == f"wrote 1 theorem file(s) and Camp.All to {out}"
    assert err == (f"serq-ref: 1 case(s) outside the fragment, no theorem: {tmp_path.name}/serve.jsonl#1 (the "
                   f"first: outside the Lean fragment: the function `free`)\n")


def test_lean_takes_help_and_options_before_its_file(tmp_path, capsys) -> None:
    """`serq-ref lean --help` and an option ahead of FILE reach lean's own
    parsers (the main parser once refused a leading option after `lean`)."""
    for flag in ("--help", "-h"):
        code, out, _ = run_cli(capsys, "lean", flag)
        assert code == 0 and out.startswith("usage: serq-ref lean FILE")
    path = tmp_path / "cached.json"
    path.write_text(json.dumps(CACHED))
    code, out, err = run_cli(capsys, "lean", "--answer", "mirror", str(path))
    assert code == 0, err
    assert theorem_of(out)[2] == [(0, 61), (1, 43)]
    target = tmp_path / "Cached.lean"
    code, _, err = run_cli(capsys, "lean", "--out", str(target), "--answer", "mirror", str(path))
    assert code == 0 and target.read_text() == out
