"""``serq-ref sweep`` (semantics/sweep.py, docs/sweep.md): the values of a
--set, the cross product and the seeds, every figure per point with its mean
and Student t interval, the same bytes whatever the workers, the cliff rule,
the plot, usage errors naming the option; and section 8's sweep, recorded in
docs/data/sweep_section8.json, holding docs/data/section8.json's figures."""

import argparse
import json
import math
from pathlib import Path

import pytest

from semantics.cli import main
from semantics.statistics import calculate_student_t_quantile
from semantics.sweep import (CLIFF_FACTOR, CLIFF_FRACTION, Setting, Sweep, Value, cliffs, mean_and_half_width,
                             parse_setting)

ROOT = Path(__file__).resolve().parent.parent
MM1 = "examples/single-turn/mm1.sq"
RECORD = ROOT / "docs/data/sweep_section8.json"
SECTION8 = ROOT / "docs/data/section8.json"
#: The command docs/sweep.md and the issue give; its JSON is the record.
SECTION8_COMMAND = ["sweep", "examples/replay/vllm_replay.sq", "--set", "sessions=333", "--set", "spacing=2.5:5:0.5",
                    "--set", "async_scheduling=0"]


def texts(setting: Setting) -> list[str]:
    return [v.text for v in setting.values]


# --------------------------------------------------------------------------
# values


def test_a_range_counts_in_exact_decimals_and_includes_a_stop_it_lands_on():
    s = parse_setting("x=0.1:0.3:0.1")
    assert texts(s) == ["0.1", "0.2", "0.3"]
    assert [v.value for v in s.values] == [0.1, 0.2, 0.3]  # never 0.30000000000000004
    assert texts(parse_setting("spacing=2.5:5:0.5")) == ["2.5", "3.0", "3.5", "4.0", "4.5", "5.0"]
    assert texts(parse_setting("n=1:10:3")) == ["1", "4", "7", "10"]
    assert texts(parse_setting("n=1:2:0.3")) == ["1.0", "1.3", "1.6", "1.9"]  # 2.2 is past STOP
    assert texts(parse_setting("n=5:1:-2")) == ["5", "3", "1"]
    assert texts(parse_setting("n=3:3:1")) == ["3"]


def test_a_list_is_taken_as_written_in_its_order():
    s = parse_setting(" rate = 0.9, 1e-3 ,2 ")
    assert s.name == "rate" and texts(s) == ["0.9", "1e-3", "2"] and [v.value for v in s.values] == [0.9, 0.001, 2.0]


@pytest.mark.parametrize("text, said", [
    ("x", "expected NAME=V1,V2"),
    ("x=", "expected NAME=V1,V2"),
    ("x=1:2", "START:STOP:STEP"),
    ("x=1:2:0", "STEP must not be 0"),
    ("x=1:2:-1", "empty"),
    ("x=1:a:1", "STOP is not a number"),
    ("x=1e999,2", "overflows"),
    ("x=0:1e999:1", "overflows"),
    ("x=0:inf:1", "finite"),
    ("x=nan", "NaN"),
    ("x=1,,2", "empty value"),
    ("x=1,1.0", "given twice"),
    ("x=0:1e9:1", "at most"),
])
def test_a_bad_value_is_refused_saying_why(text, said):
    with pytest.raises(argparse.ArgumentTypeError, match=said):
        parse_setting(text)


@pytest.mark.parametrize("argv, said", [
    (["sweep", MM1, "--set", "rho=1,2"], "--set rho: the program declares no let constant rho"),
    (["sweep", MM1, "--set", "lambda=1:0:1"], "argument --set: lambda=1:0:1: STEP 1 goes away"),
    (["sweep", MM1, "--set", "lambda=1e999"], "overflows"),
    (["sweep", MM1], "at least one --set"),
    (["sweep", MM1, "--set", "lambda=0.5", "--set", "lambda=0.6"], "given twice"),
    (["sweep", MM1, "--set", "lambda=0.5,0.6", "--plot", "x.jpg"], "--plot x.jpg"),
    (["sweep", MM1, "--set", "lambda=0.5", "--plot", "x.png"], "--plot draws"),
    (["sweep", MM1, "--set", "lambda=0.5", "--y", "nope,sojourn,stage.server.utilization,run.turns"], "--y nope: no such figure"),
    (["sweep", MM1, "--set", "lambda=0:1000:0.01", "--seeds", "2000"], "at most"),
    (["sweep", "examples/single-turn/nope.sq", "--set", "lambda=1"], "nope.sq"),
])
def test_bad_usage_exits_2_naming_the_option(argv, said, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert said in err and "Traceback" not in err


# --------------------------------------------------------------------------
# a cheap sweep, run


def sweep_output(capsys, *extra: str) -> str:
    assert main(["sweep", MM1, "--set", "lambda=0.5,0.8", "--horizon", "200", "--warmup", "0", "--seeds", "3", *extra]) == 0
    return capsys.readouterr().out


def test_the_same_bytes_whatever_the_workers(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)
    one = sweep_output(capsys, "--json", "--csv", str(tmp_path / "1.csv"))
    two = sweep_output(capsys, "--json", "--csv", str(tmp_path / "2.csv"), "--workers", "2")
    assert one == two
    assert (tmp_path / "1.csv").read_bytes() == (tmp_path / "2.csv").read_bytes()
    assert sweep_output(capsys) == sweep_output(capsys, "--workers", "2")


def test_each_point_is_the_runs_of_its_seeds_and_their_student_t_interval(capsys, monkeypatch):
    monkeypatch.chdir(ROOT)
    swept = json.loads(sweep_output(capsys, "--json"))
    assert swept["seeds"] == [7, 8, 9]  # mm1.sq's seed 7 and the two after it
    assert [p["set"] for p in swept["points"]] == [{"lambda": "0.5"}, {"lambda": "0.8"}]
    for point in swept["points"]:
        runs = []
        for seed in swept["seeds"]:
            assert main(["run", MM1, "--set", f"lambda={point['set']['lambda']}", "--horizon", "200", "--warmup", "0", "--seed",
                         str(seed), "--json"]) == 0
            runs.append(json.loads(capsys.readouterr().out))
        figure = point["figures"]["sojourn"]
        values = [run["observes"]["sojourn"]["mean"] for run in runs]
        assert figure["values"] == values
        assert figure["mean"] == math.fsum(values) / 3
        s = math.sqrt(sum((v - figure["mean"]) ** 2 for v in values) / 2)
        assert figure["ci"] == pytest.approx(calculate_student_t_quantile(0.975, 2) * s / math.sqrt(3), rel=1e-12)
        assert point["figures"]["run.arrivals"]["values"] == [run["arrivals"] for run in runs]
        assert point["figures"]["jobs.max"]["values"] == [run["gauges"]["jobs"]["max"] for run in runs]


def test_the_table_has_the_swept_values_units_and_intervals(capsys, monkeypatch):
    monkeypatch.chdir(ROOT)
    lines = sweep_output(capsys, "--y", "sojourn,slow,run.arrivals").splitlines()
    assert lines[0] == f"sweep: {MM1}, 2 points x 3 seeds (seeds 7-9)"
    assert lines[2].split() == ["lambda", "sojourn", "slow", "run.arrivals"]
    assert lines[3].split() == ["(mean)", "(fraction)", "(count)"]
    assert set(lines[4]) <= {"-", " "}
    assert [line.split()[0] for line in lines[5:7]] == ["0.5", "0.8"] and "±" in lines[5]


def test_one_seed_has_no_interval():
    assert mean_and_half_width([2.5]) == (2.5, None)
    mean, half = mean_and_half_width([1.0, 3.0])
    assert mean == 2.0 and half == pytest.approx(12.706204736174705 * 1.0, rel=1e-9)


def make_sweep(xs, series: dict[str, list[float]]) -> Sweep:
    setting = Setting("x", tuple(Value(str(x), float(x)) for x in xs))
    results = [[{name: values[i] for name, values in series.items()}] for i in range(len(xs))]
    return Sweep("p.sq", (setting,), (1,), [(v,) for v in setting.values], results)


def test_the_cliff_is_the_largest_jump_by_a_factor_or_of_a_fraction():
    sweep = make_sweep([1, 2, 3, 4], {"t": [50.0, 0.6, 0.4, 0.3], "h": [0.2, 0.8, 0.85, 0.9], "flat": [1, 2, 4, 8]})
    found = {c["figure"]: c for c in cliffs(sweep, ["t", "h", "flat"])}
    assert set(found) == {"t", "h"}  # flat doubles at most: no cliff
    assert (found["t"]["from"], found["t"]["to"], found["t"]["rule"]) == ("1", "2", "factor")
    assert found["t"]["size"] == pytest.approx(50 / 0.6) and found["t"]["size"] >= CLIFF_FACTOR
    assert (found["h"]["rule"], found["h"]["size"]) == ("fraction", pytest.approx(0.6))
    assert found["h"]["size"] >= CLIFF_FRACTION
    below = make_sweep([1, 2], {"h": [0.5, 0.74], "t": [1.0, 9.9]})
    assert cliffs(below, ["h", "t"]) == []


def test_the_plot_is_drawn_the_same_bytes_every_time(capsys, tmp_path, monkeypatch):
    pytest.importorskip("matplotlib", reason="the optional extra plot (pip install -e '.[plot]'); .[test] has it")
    monkeypatch.chdir(ROOT)
    for name in ("a.svg", "b.svg", "a.png"):
        sweep_output(capsys, "--plot", str(tmp_path / name))
    assert (tmp_path / "a.svg").read_bytes() == (tmp_path / "b.svg").read_bytes()
    assert (tmp_path / "a.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert b"sojourn" in (tmp_path / "a.svg").read_bytes()


def test_without_matplotlib_plot_is_a_usage_error(capsys, monkeypatch):
    import sys

    monkeypatch.chdir(ROOT)
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    assert main(["sweep", MM1, "--set", "lambda=0.5,0.8", "--plot", "x.png"]) == 2
    assert ".[plot]" in capsys.readouterr().err


def test_a_sweep_is_resumed_from_its_journal(capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)
    journal = tmp_path / "j.jsonl"
    whole = sweep_output(capsys, "--json")
    assert sweep_output(capsys, "--json", "--resume", str(journal)) == whole
    lines = journal.read_text().splitlines()
    assert len(lines) == 1 + 6
    journal.write_text("\n".join(lines[:3]) + "\n")  # stopped after two runs
    assert sweep_output(capsys, "--json", "--resume", str(journal)) == whole
    assert len(journal.read_text().splitlines()) == 7


# --------------------------------------------------------------------------
# section 8's cliff


def test_the_recorded_section8_sweep_has_section8s_figures():
    """docs/data/sweep_section8.json is the JSON of SECTION8_COMMAND; every point
    at a spacing of section 8's table has that row's figures exactly, every
    request served; the cliff is between 2.5 and 3.0 s."""
    record = json.loads(RECORD.read_text())
    assert record["command"] == "serq-ref " + " ".join(SECTION8_COMMAND) + " --json"
    swept = record["output"]
    rows = {row["spacing"]: row["serq_ref"] for row in json.loads(SECTION8.read_text())["rows"] if not row["pinned"]}
    spacings = [float(p["set"]["spacing"]) for p in swept["points"]]
    assert spacings == [2.5, 3.0, 3.5, 4.0, 4.5, 5.0]
    matched = 0
    for point in swept["points"]:
        figures = point["figures"]
        assert figures["ttft.count"]["mean"] == 3321 and figures["full_hit.count"]["mean"] == 2988
        row = rows.get(float(point["set"]["spacing"]))
        if row is not None:
            assert (figures["ttft"]["mean"], figures["full_hit"]["mean"]) == (row["ttft"], row["full_hit"])
            matched += 1
    assert matched == 4  # 2.5, 3.0, 3.5, 5.0
    cliff = {c["figure"]: (c["from"], c["to"]) for c in swept["cliffs"]}
    assert cliff["ttft"] == cliff["full_hit"] == ("2.5", "3.0")


#: The issue's done-when command as given (lib/vllm.sq's default engine, the asynchronous one); its JSON is
#: docs/data/sweep_section8_async.json.
ASYNC_RECORD = ROOT / "docs/data/sweep_section8_async.json"
ASYNC_COMMAND = SECTION8_COMMAND[:-2]
SECTION8_DOC = ROOT / "docs/section8.md"


def doc_table() -> dict[str, list[str]]:
    """docs/section8.md's table of both engines: spacing -> its cells (sync TTFT, sync full-hit, async TTFT,
    async full-hit, async budget used, async batch), as printed there."""
    text = SECTION8_DOC.read_text()
    section = text[text.index("## The cliff as a sweep: both engines"):]
    section = section[:section.index("\n## ")]
    rows = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("| ") and cells[0].replace(".", "").isdigit():
            rows[cells[0]] = [part.strip() for cell in cells[1:] for part in cell.split("/")]
    return rows


def test_section8_md_states_both_engines_figures_as_their_commands_give_them():
    """Each engine's command is shown in docs/section8.md exactly as recorded, and the doc's table has the
    figures of the records (the commands' JSON output), as the sweep's table prints them (4 digits)."""
    sync, asynchronous = json.loads(RECORD.read_text()), json.loads(ASYNC_RECORD.read_text())
    assert asynchronous["command"] == "serq-ref " + " ".join(ASYNC_COMMAND) + " --json"
    doc = SECTION8_DOC.read_text()
    for record in (sync, asynchronous):
        assert record["command"].replace(" --json", " --plot cliff.png") in doc
    table = doc_table()
    assert list(table) == ["2.5", "3.0", "3.5", "4.0", "4.5", "5.0"]
    for p, q in zip(sync["output"]["points"], asynchronous["output"]["points"]):
        spacing = p["set"]["spacing"]
        assert q["set"]["spacing"] == spacing
        f, g = p["figures"], q["figures"]
        assert g["ttft.count"]["mean"] == 3321 and g["full_hit.count"]["mean"] == 2988
        printed = [f"{x:.4g}" for x in (f["ttft"]["mean"], f["full_hit"]["mean"], g["ttft"]["mean"],
                                        g["full_hit"]["mean"], g["stage.engine.budget_used"]["mean"],
                                        g["stage.engine.mean_batch"]["mean"])]
        assert table[spacing] == printed, spacing
    cliff = {c["figure"]: (c["from"], c["to"]) for c in asynchronous["output"]["cliffs"]}
    assert cliff["ttft"] == cliff["full_hit"] == ("2.5", "3.0")


@pytest.mark.campaign
@pytest.mark.parametrize("record, command", [(RECORD, SECTION8_COMMAND), (ASYNC_RECORD, ASYNC_COMMAND)],
                         ids=["synchronous", "asynchronous"])
def test_the_section8_sweeps_reproduce_their_records(record, command, capsys):
    """The command, run here (about 30 s of CPU each), prints the recorded JSON byte for byte."""
    assert main(command + ["--json"]) == 0
    out = capsys.readouterr().out
    assert json.loads(out) == json.loads(record.read_text())["output"]
    assert out == json.dumps(json.loads(record.read_text())["output"], indent=1, allow_nan=False) + "\n"
