"""What `serq-ref oracle replay` pays besides its run, held to what it paid
before (branch startup3): the CSV written from the cells without a Row per
request (oracle.replay.replay_csv: the same text as COLUMNS' header and each
row's ``csv()``), the trace's session numbers read without the csv module
when a line is its cells split at the commas (trace_session_numbers, the
same answer or error as csv.reader's on any text), and the trace's
sessions handed from the replay's check to the run (semantics.fast.run's
``trace_sessions``: the same result as the run that reads the file
itself)."""

from __future__ import annotations

import csv
import gc
import random

import pytest

from oracle import replay as replay_module
from oracle.replay import COLUMNS, replay, replay_csv, replay_program, trace_session_numbers
from semantics.fast import run
from shared_paths import SHARED

CACHE_TRACE = str(SHARED / "oracle" / "prefix_cache" / "cache_trace.csv")


@pytest.mark.parametrize("settings", [
    dict(spacing=3, budget=64, max_seqs=4, blocks=20),
    dict(spacing=0.5, budget=64, max_seqs=2, blocks=20, chunk=8),
    dict(spacing=3, budget=64, max_seqs=4, blocks=20, shared_head=40),
    dict(spacing=7.25, budget=64, max_seqs=4, blocks=20, sessions=2, asynchronous=True),
])
def test_the_csv_is_the_rows_csv(settings):
    rows = replay(CACHE_TRACE, **settings)
    assert replay_csv(CACHE_TRACE, **settings) == ",".join(COLUMNS) + "\n" + "".join(r.csv() + "\n" for r in rows)


def test_the_command_prints_replay_csv(capsys):
    from semantics.cli import main

    assert main(["oracle", "replay", CACHE_TRACE, "--spacing", "3", "--budget", "64", "--max-seqs", "4",
                 "--blocks", "20"]) == 0
    assert capsys.readouterr().out == replay_csv(CACHE_TRACE, 3, 64, 4, 20)


def test_a_run_given_the_trace_sessions_is_the_run_that_reads_them():
    program, sessions = replay_program(CACHE_TRACE, 3, 64, 4, 20)
    assert run(program, trace_sessions=sessions) == run(program)


def test_a_session_that_does_not_finish_is_named(monkeypatch):
    # the horizon cut short: the first turn without a `done` sample is the error's
    real = replay_module.replay_program

    def short(*args, **kwargs):
        import dataclasses

        program, sessions = real(*args, **kwargs)
        return dataclasses.replace(program, horizon=6.0), sessions

    monkeypatch.setattr(replay_module, "replay_program", short)
    from semantics.errors import RunError

    with pytest.raises(RunError, match=r"^trace session \d+, turn \d+ did not finish by the horizon 6 steps$"):
        replay_csv(CACHE_TRACE, 3, 64, 4, 20)
    assert gc.isenabled()  # the collector, off from the run to the last cell, is on again after an error too


def test_the_collector_is_as_it_was_after_a_replay():
    assert gc.isenabled()
    replay(CACHE_TRACE, 3, 64, 4, 20)
    assert gc.isenabled()
    gc.disable()
    try:
        replay(CACHE_TRACE, 3, 64, 4, 20)
        assert not gc.isenabled()
    finally:
        gc.enable()


def _by_csv_module(path):
    """trace_session_numbers as it read every file before (csv.reader on the file)."""
    with open(path, newline="", encoding="utf-8") as f:
        rows = csv.reader(f)
        header = next(rows, None)
        if header is None:
            return []
        k = len(header) - 1 - header[::-1].index("session")
        return sorted({int(float(row[k] if k < len(row) else None)) for row in rows if row})


def _outcome(read, path):
    try:
        return ("answer", read(path))
    except Exception as e:  # noqa: BLE001 - the error, its kind and words, is what is compared
        return ("error", type(e).__name__, str(e))


def test_the_session_numbers_are_the_csv_modules(tmp_path):
    rng = random.Random(22)
    pieces = ["session", "turn", "new", ",", "\n", "\r\n", "\r", '"', " ", "1", "2", "3.0", "0", "x", "", "\n\n",
              "1e1", "-0", "\x00", "é"]
    path = tmp_path / "t.csv"
    answered = 0
    for _ in range(3000):
        if rng.random() < 0.5:  # a header, then rows of cells
            header = rng.choice(["session,turn,new,out,think,forced", "turn,session,new", "session,turn,session",
                                 "a,b", ""])
            lines = [header] + [",".join(rng.choice(["1", "2", " 3", "4.0", "", "x", '"5"', "1_0"])
                                         for _ in range(rng.randint(0, 6))) for _ in range(rng.randint(0, 8))]
            text = rng.choice(["\n", "\r\n"]).join(lines) + rng.choice(["", "\n", "\n\n"])
        else:  # anything
            text = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 30)))
        path.write_text(text, encoding="utf-8", newline="")
        theirs = _outcome(_by_csv_module, path)
        assert _outcome(trace_session_numbers, path) == theirs, repr(text)
        answered += theirs[0] == "answer"
    assert answered > 300  # not only errors compared
    assert trace_session_numbers(str(SHARED / "traces" / "short_base.csv")) == list(range(333))


# --- the command line builds and imports only the command named ----------------------------------------------

REPLAY_PROBE = """\
import sys
from semantics.cli import main
code = main(["oracle", "replay", sys.argv[1], "--spacing", "3", "--budget", "64", "--max-seqs", "4", "--blocks", "20"])
others = sorted(m for m in sys.modules if m in sys.argv[2].split(","))
print("loaded:", ",".join(others))
sys.exit(code)
"""

#: what `oracle replay` needs none of: the other commands' modules, the program loader (the replay compiles its
#: program through the compiled-program cache), and the fast forms the step loop does not use (a replay it
#: runs to its end: semantics/fast/engine.py installs them when it gives a run back)
NOT_FOR_THE_REPLAY = ("semantics.sweep", "semantics.workers", "semantics.property_campaign", "semantics.pipeline",
                      "semantics.cli_common", "oracle.peer_cli", "lean_bridge.cli", "semantics.report", "json",
                      "semantics.fast.forms", "semantics.fast.fifo", "semantics.fast.delay", "semantics.fast.measure",
                      "semantics.fast.workload", "semantics.fast.settle", "semantics.fast.sessions",
                      "semantics.fast.chunks")


def test_the_replay_imports_no_other_commands_modules():
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    done = subprocess.run([sys.executable, "-c", REPLAY_PROBE, CACHE_TRACE, ",".join(NOT_FOR_THE_REPLAY)],
                          capture_output=True, text=True, env=dict(os.environ, PYTHONPATH=str(root)), cwd=root)
    assert done.returncode == 0, done.stderr
    assert done.stdout.count("\n") == 1 + len(replay(CACHE_TRACE, 3, 64, 4, 20)) + 1
    assert done.stdout.rstrip().endswith("loaded:"), done.stdout.splitlines()[-1]


@pytest.mark.parametrize("argv", [
    ["oracle", "replay", "t.csv", "--spacing", "3", "--budget", "64", "--max-seqs", "4", "--blocks", "20"],
    ["oracle", "replay", "t.csv", "--spacing", "3", "--budget", "64", "--max-seqs", "4", "--blocks", "20",
     "--sessions", "2", "--chunk", "8", "--shared-head", "4", "--block-size", "8", "--real", "--vllm-python", "p"],
    ["oracle", "run", "s.json", "--json", "--no-older-rule"],
    ["oracle", "check", "d", "--workers", "2", "--every", "3"],
    ["oracle", "campaign", "5", "--seed", "1", "--kind", "replay", "--async"],
    ["oracle", "diverge", "a.log", "b.log"],
    ["oracle", "regenerate", "d", "--no-write"],
    ["check", "p.sq", "--horizon", "5", "--set", "x=1"],
    ["run", "p.sq", "--engine", "definition", "--json"],
    ["trace", "p.sq", "--steps", "all", "--from", "3"],
    ["fmt", "--check", "a.sq", "b.sq"],
    ["sweep", "p.sq", "--set", "x=1,2"],
    ["property", "campaign", "properties", "--examples", "3"],
    ["peer", "p.sq", "--horizon", "5"],
    ["lean", "check", "d"],
])
def test_the_parser_of_the_command_named_parses_as_every_commands_parser(argv):
    from semantics.cli import build_parser

    alone = build_parser(argv[0], argv[1] if argv[0] == "oracle" else None)
    assert [a.dest for a in alone._actions if a.dest == "command"] == ["command"]
    chosen = next(a for a in alone._actions if a.dest == "command").choices
    assert list(chosen) == [argv[0]]
    assert vars(alone.parse_args(argv)) | {"usage_parser": None} == \
        vars(build_parser().parse_args(argv)) | {"usage_parser": None}
    whole = next(a for a in build_parser()._actions if a.dest == "command").choices[argv[0]]
    assert chosen[argv[0]].format_usage() == whole.format_usage()
    if argv[0] == "oracle":
        inner = next(a for a in chosen["oracle"]._actions if a.dest == "oracle_command").choices
        assert list(inner) == [argv[1]]
        full = next(a for a in whole._actions if a.dest == "oracle_command").choices[argv[1]]
        assert inner[argv[1]].format_help() == full.format_help()
    else:
        assert chosen[argv[0]].format_help() == whole.format_help()


# --- the process's end ----------------------------------------------------------------------------------------

FREEZE_PROBE = """\
import gc, sys
from semantics.cli import main
sys.argv = ["serq-ref", "trace", "--rules"]
code = main()
print("frozen:", gc.get_freeze_count() > 0, file=sys.stderr)
print("threshold:", gc.get_threshold()[0], file=sys.stderr)
sys.exit(code)
"""


def test_the_process_command_line_freezes_what_it_left_and_a_given_one_does_not(capsys):
    """The process's own command line collects its youngest generation less often (cli.collect_less) and
    freezes what it left at its end; a command line given to main (the tests' own process) leaves the
    collector as it is."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    from semantics.cli import COMMAND_LINE_GEN0, main

    root = Path(__file__).resolve().parents[1]
    done = subprocess.run([sys.executable, "-c", FREEZE_PROBE], capture_output=True, text=True,
                          env=dict(os.environ, PYTHONPATH=str(root)), cwd=root)
    assert done.returncode == 0 and "frozen: True" in done.stderr, done.stderr
    assert f"threshold: {COMMAND_LINE_GEN0}" in done.stderr, done.stderr
    before, threshold = gc.get_freeze_count(), gc.get_threshold()
    assert main(["trace", "--rules"]) == 0
    assert gc.get_freeze_count() == before and gc.get_threshold() == threshold
    assert "session/" in capsys.readouterr().out
