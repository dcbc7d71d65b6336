"""semantics/workers.py: independent cases on processes of this machine, in
case order whatever the number of workers, a dead worker named and its cases
sent again, an exception raised at its case's turn, and the journal a run is
resumed from (docs/sweep.md, "Workers and Ray"). Ray itself: tests/test_ray.py."""

import json
import os

import pytest

from semantics.errors import ProgramError, Span, UsageError
from semantics.workers import MAX_BATCH, Journal, WorkerLost, batch_size, fingerprint, run_cases


def square(x):
    return x * x


def die_on(marker_dir, die, x):
    """Kills its worker on case ``x`` in ``die`` (the first ``die[x]`` times: one marker file each)."""
    if x in die:
        tries = len([name for name in os.listdir(marker_dir) if name.startswith(f"{x}-")])
        if tries < die[x]:
            open(os.path.join(marker_dir, f"{x}-{tries}"), "w").close()
            os._exit(9)
    return -x


def fails_on_5(x):
    if x == 5:
        raise ProgramError("bad case", Span("prog.sq", 3, 7))
    return x


def test_batches_are_small_for_few_cases_and_bounded_for_many():
    assert batch_size(10, 2) == 1
    assert batch_size(160, 2) == 10
    assert batch_size(5000, 2) == MAX_BATCH
    assert batch_size(0, 4) == 1


@pytest.mark.parametrize("workers", [1, 2, 3])
def test_results_come_in_case_order_whatever_the_workers(workers):
    cases = list(range(37))
    assert list(run_cases(square, cases, workers=workers)) == [x * x for x in cases]


def test_a_dead_worker_is_named_and_its_cases_run_again(tmp_path):
    import functools

    notes = []
    task = functools.partial(die_on, str(tmp_path), {7: 1})
    out = list(run_cases(task, list(range(20)), workers=2, note=notes.append))
    assert out == [-x for x in range(20)]  # nothing lost
    assert len(notes) == 1 and "died (exit status 9)" in notes[0] and "case" in notes[0] and "7" in notes[0]
    assert "sent again" in notes[0]


def test_a_worker_that_dies_every_time_stops_the_run_naming_the_cases(tmp_path):
    import functools

    notes = []
    task = functools.partial(die_on, str(tmp_path), {3: 99})
    labels = [f"case-{i}" for i in range(8)]
    with pytest.raises(WorkerLost, match="case-3") as raised:
        list(run_cases(task, list(range(8)), workers=2, note=notes.append, labels=labels))
    assert "no result" in raised.value.message
    assert len(notes) == 2  # retried twice, then stopped


@pytest.mark.parametrize("workers", [1, 2])
def test_an_error_of_a_case_is_raised_at_its_turn_with_its_place(workers):
    seen = []
    with pytest.raises(ProgramError) as raised:
        for value in run_cases(fails_on_5, list(range(12)), workers=workers):
            seen.append(value)
    assert seen == [0, 1, 2, 3, 4]
    assert raised.value.message == "bad case" and raised.value.span == Span("prog.sq", 3, 7)


def test_a_journal_resumes_a_run_from_the_cases_it_recorded(tmp_path):
    path = str(tmp_path / "journal.jsonl")
    key = fingerprint("test", 1)
    journal = Journal(path, key, 10)
    got = []
    for value in run_cases(square, list(range(10)), journal=journal):
        got.append(value)
        if len(got) == 4:
            break  # the run stopped after 4 cases
    journal.close()
    lines = open(path).read().splitlines()
    assert json.loads(lines[0]) == {"serq_ref_journal": 1, "key": key}
    assert [json.loads(line)["case"] for line in lines[1:]] == [0, 1, 2, 3]
    with open(path, "a") as f:
        f.write('{"case": 4, "res')  # a line cut short by a killed run
    journal = Journal(path, key, 10)
    assert sorted(journal.results) == [0, 1, 2, 3]
    ran = []

    def only_new(x):
        ran.append(x)
        return x * x

    assert list(run_cases(only_new, list(range(10)), journal=journal)) == [x * x for x in range(10)]
    journal.close()
    assert ran == [4, 5, 6, 7, 8, 9]
    assert sorted(Journal(path, key, 10).results) == list(range(10))


def test_a_journal_of_another_run_is_refused(tmp_path):
    path = str(tmp_path / "journal.jsonl")
    Journal(path, fingerprint("a"), 3).close()
    with pytest.raises(UsageError, match="another run"):
        Journal(path, fingerprint("b"), 3)
    (tmp_path / "other.txt").write_text("hello\n")
    with pytest.raises(UsageError, match="not a serq-ref journal"):
        Journal(str(tmp_path / "other.txt"), fingerprint("a"), 3)


def test_ray_missing_or_unreachable_is_a_usage_error(monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "ray", None)  # as if the extra were not installed
    with pytest.raises(UsageError, match=r"\.\[ray\]"):
        list(run_cases(square, [1, 2], ray="auto"))


# --------------------------------------------------------------------------
# the commands that take --workers: the same output with 2 processes as in one


def run_main(argv, capsys, monkeypatch):
    from pathlib import Path

    from semantics.cli import main

    monkeypatch.chdir(Path(__file__).resolve().parent.parent)
    status = main(argv)
    return status, capsys.readouterr().out


def test_oracle_check_on_two_workers_is_the_same_bytes(capsys, monkeypatch):
    argv = ["oracle", "check", "../shared/oracle/vllm", "../shared/oracle/serve"]
    one = run_main(argv, capsys, monkeypatch)
    two = run_main(argv + ["--workers", "2"], capsys, monkeypatch)
    assert one == two and one[1].endswith(" failed\n")


def test_oracle_campaign_on_two_workers_reports_the_same(capsys, monkeypatch, tmp_path):
    argv = ["oracle", "campaign", "40", "--seed", "1", "--kind", "serve", "--recorded",
            "oracle/data/campaign/serve.jsonl"]
    one = run_main(argv + ["--report", str(tmp_path / "1.jsonl")], capsys, monkeypatch)
    two = run_main(argv + ["--report", str(tmp_path / "2.jsonl"), "--workers", "2"], capsys, monkeypatch)
    assert one[0] == two[0] == 0
    assert (tmp_path / "1.jsonl").read_bytes() == (tmp_path / "2.jsonl").read_bytes()
    assert len((tmp_path / "1.jsonl").read_text().splitlines()) == 40


def test_peer_campaign_on_two_workers_and_resumed_reports_the_same(capsys, monkeypatch, tmp_path):
    argv = ["peer", "campaign", "3", "--seed", "1"]  # program 2 differs (P-known): its minimising is in the report
    journal = tmp_path / "j.jsonl"
    one = run_main(argv + ["--report", str(tmp_path / "1.json"), "--resume", str(journal)], capsys, monkeypatch)
    two = run_main(argv + ["--report", str(tmp_path / "2.json"), "--workers", "2"], capsys, monkeypatch)
    lines = journal.read_text().splitlines()
    assert len(lines) == 1 + 3
    journal.write_text("\n".join(lines[:3]) + "\n")  # as if stopped after two programs
    three = run_main(argv + ["--report", str(tmp_path / "3.json"), "--resume", str(journal)], capsys, monkeypatch)
    assert one == two == three
    assert len({(tmp_path / f"{k}.json").read_bytes() for k in (1, 2, 3)}) == 1
    assert '"disagreements": [' in (tmp_path / "1.json").read_text()
