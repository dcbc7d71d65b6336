"""A progress bar on every command that runs many cases (issue 21 §3), and
`peer campaign` the same bytes on two workers (§2):
``lean check``, ``peer check`` and ``oracle regenerate`` make a
``semantics.progress.CaseProgress`` of their number of cases and advance it
once a case, and print the same lines with it as without it. (The bar draws
only on a terminal; here a recorder stands in for it.)"""

import pytest

import semantics.progress
from semantics.cli import main
from shared_paths import SHARED

VLLM = SHARED / "oracle" / "vllm"


class Recorder:
    """A CaseProgress that records its label, total, advances and the lines printed through it."""

    made: list["Recorder"] = []

    def __init__(self, total, label, stream=None, unit="case", done=0, draw=True):
        self.total, self.label, self.done, self.unit, self.printed = total, label, done, unit, []
        Recorder.made.append(self)

    def advance(self, count=1):
        self.done += count

    def print(self, line):
        self.printed.append(line)
        print(line)

    def write(self, line):
        pass

    def close(self):
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


@pytest.fixture
def recorder(monkeypatch):
    Recorder.made = []
    monkeypatch.setattr(semantics.progress, "CaseProgress", Recorder)
    return Recorder.made


def test_lean_check_advances_a_bar_once_a_scenario(recorder, capsys):
    assert main(["lean", "check", str(VLLM)]) == 0
    out = capsys.readouterr().out.strip().splitlines()
    from lean_bridge.check import scenarios_in

    scenarios = len(scenarios_in(str(VLLM)))
    assert scenarios == 7
    [bar] = recorder
    assert (bar.label, bar.total, bar.done) == ("lean check", scenarios, scenarios)
    assert out[-1] == f"{scenarios} passed, 0 failed"


def test_peer_check_advances_a_bar_once_a_program_and_prints_through_it(recorder, capsys):
    assert main(["peer", "check", str(VLLM)]) == 0
    out = capsys.readouterr().out.splitlines()
    [bar] = recorder
    assert (bar.label, bar.total, bar.done) == ("peer check", 7, 7)
    assert bar.printed == out[:-1] and len(out) == 8  # every program's line went through the bar


def test_oracle_regenerate_advances_a_bar_once_a_scenario(recorder, capsys, monkeypatch, tmp_path):
    from oracle import real

    def regenerate(directory, out, python, older_rule, report):  # the real scheduler's answers, stood in for
        for path in real.scenario_files(directory):
            report(f"{path.name[:-5]}: equal")
        return 0

    monkeypatch.setattr(real, "find_python", lambda *a: None)
    monkeypatch.setattr(real, "regenerate", regenerate)
    code = main(["oracle", "regenerate", str(VLLM), "--no-write"])
    out = capsys.readouterr().out.splitlines()
    [bar] = recorder
    count = len(real.scenario_files(VLLM))
    assert (bar.label, bar.total, bar.done) == ("oracle regenerate", count, count)
    assert code == 0 and bar.printed == out[:count]


def test_without_a_terminal_the_bar_prints_plain_lines(capsys):
    bar = semantics.progress.CaseProgress(2, "x")
    assert bar.bar is None  # the test's streams are not terminals
    bar.print("a line")
    bar.advance()
    assert capsys.readouterr() == ("a line\n", "")


def test_peer_campaign_is_the_same_bytes_on_two_workers(capsys, tmp_path):
    """`peer campaign N --workers 2` reports what one process does, byte for byte (the programs are cases of
    semantics.workers.run_cases, their results in case order)."""
    pytest.importorskip("pyserq")
    outputs = []
    for name, extra in (("one", []), ("two", ["--workers", "2"])):
        report = tmp_path / f"{name}.json"
        code = main(["peer", "campaign", "4", "--seed", "1", "--report", str(report), *extra])
        outputs.append((code, capsys.readouterr().out, report.read_bytes()))
    assert outputs[0] == outputs[1]
    assert outputs[0][1].startswith("4 programs (seed 1): ")
