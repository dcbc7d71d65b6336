"""`~empirical("FILE", "COLUMN")` (issue 21 §4, docs/design/draws.md): a
value of a CSV file's column, each as likely, read when the program is
compiled; its draws against the data's mean and variance, the same per
seed; the errors located in the program and in the CSV; fmt, the IR's
schema and codec; the linker's range; pyserq is not given it."""

from __future__ import annotations

import json
import statistics

import pytest

from ir_schema import validate
from oracle.peer import encode_for_pyserq
from semantics import codec, ir
from semantics.cli import main
from semantics.compiler import compile_source
from semantics.errors import ProgramError
from semantics.smallstep.rng import derive_stream, sample_distribution
from semantics.syntax.printer import format_text

#: a column of 8 values (and a text column beside it): mean 5, population variance 9.5
DATA = "id,len,name\n1,1,a\n2,2,b\n3,3,c\n4,4,d\n\n5,5,e\n6,6,f\n7,7,g\n8,12,h\n"
MEAN, VARIANCE = 5.0, 9.5

PROGRAM = """\
stage server : fifo;
workload {
  arrive poisson(0.5);
}
session {
  set x = ~empirical("data.csv", "len");
  run server (x / 10);
  observe len = x;
  end;
}
run { horizon 6000; seed 3; }
"""


def write(tmp_path, program: str = PROGRAM, data: str = DATA):
    (tmp_path / "data.csv").write_text(data)
    path = tmp_path / "e.sq"
    path.write_text(program)
    return path


def test_the_draw_is_one_value_a_uniform_number_each_as_likely():
    values = [1.0, 2.0, 3.0, 4.0]
    stream = derive_stream(11, ("test", "Empirical"))
    drawn, position = [], 0
    for _ in range(40_000):
        value, position = sample_distribution("Empirical", values, stream, position)
        drawn.append(value)
    assert position == 40_000  # one uniform number a draw
    counts = [drawn.count(v) for v in values]
    assert all(abs(c - 10_000) < 400 for c in counts), counts  # 4 standard deviations of a binomial(40000, 1/4)
    assert abs(statistics.fmean(drawn) - 2.5) < 0.03
    assert abs(statistics.pvariance(drawn) - 1.25) < 0.04


def test_the_program_compiles_the_columns_values_into_the_ir(tmp_path):
    path = write(tmp_path)
    program, _ = compile_source(path.read_text(), str(path))
    samples = [e for block in program.blocks for s in block for e in _samples(s)]
    assert samples == [ir.Sample("Empirical", tuple(ir.Num(v) for v in (1, 2, 3, 4, 5, 6, 7, 12)))]
    encoded = codec.encode_program(program)
    validate(encoded)  # the schema's Sample enum has Empirical
    assert codec.decode_program(encoded) == program
    formatted = format_text(path.read_text(), str(path))
    assert '~empirical("data.csv", "len")' in formatted
    assert compile_source(formatted, str(path))[0] == program


def _samples(node):
    return (n for n in ir.walk(node) if isinstance(n, ir.Sample))


def test_a_run_has_the_datas_mean_and_variance_and_the_same_bytes_per_seed(tmp_path, capsys):
    path = write(tmp_path)
    assert main(["run", str(path), "--json"]) == 0
    first = capsys.readouterr().out
    report = json.loads(first)["observes"]["len"]
    n = report["count"]
    assert n > 2500
    assert abs(report["mean"] - MEAN) < 4 * (VARIANCE / n) ** 0.5
    variance = report["cv2"] * report["mean"] ** 2  # the sample variance
    assert abs(variance - VARIANCE * n / (n - 1)) < 0.08 * VARIANCE
    assert main(["run", str(path), "--json"]) == 0
    assert capsys.readouterr().out == first  # the same seed, the same draws
    assert main(["run", str(path), "--json", "--seed", "4"]) == 0
    assert capsys.readouterr().out != first


def test_the_linker_knows_its_range(tmp_path, capsys):
    """The draw is between the column's least and greatest values: a hold of `x - 1` is never negative
    (1 is the least), one of `x - 2` can be, and the linker says so."""
    program = PROGRAM.replace("run server (x / 10);", "run server (x / 10);\n  hold p (x - SUB) { }")
    program = "pool p { cap 100; }\n" + program
    assert main(["check", str(write(tmp_path, program.replace("SUB", "1")))]) == 0
    assert "negative" not in capsys.readouterr().err
    assert main(["check", str(write(tmp_path, program.replace("SUB", "2")))]) == 0
    assert "negative" in capsys.readouterr().err


@pytest.mark.parametrize("data, where, said", [
    ("id,len\n1,2\n2,x7\n", "data.csv:3:3:", "the column `len` is 'x7', not a number"),
    ("id,len\n1,2\n2,inf\n", "data.csv:3:3:", "the column `len` is inf: every value is a finite number"),
    ("id,len\n1,2\n2\n", "data.csv:3:2:", "the column `len` has no value in this row"),
])
def test_a_bad_cell_is_an_error_at_its_line_and_column_in_the_csv(tmp_path, capsys, data, where, said):
    path = write(tmp_path, data=data)
    assert main(["run", str(path)]) == 1
    err = capsys.readouterr().err
    assert err.startswith(str(tmp_path / where)) and said in err and "Traceback" not in err
    assert f"note: {path}:6:34: the program draws the column here" in err
    assert "^" in err.splitlines()[2]  # the CSV's line and a caret under the cell


@pytest.mark.parametrize("change, data, col, said", [
    (("data.csv", "none.csv"), DATA, 22, "cannot read the file"),
    (('"len"', '"size"'), DATA, 34, "has no column `size` (its header names `id`, `len`, `name`)"),
    ((), "id,len\n", 34, "the column `len` of"),
])
def test_a_missing_file_or_column_is_an_error_at_the_programs_line(tmp_path, capsys, change, data, col, said):
    path = write(tmp_path, PROGRAM.replace(*change) if change else PROGRAM, data)
    assert main(["run", str(path)]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"{path}:6:{col}: error: ~empirical: ") and said in err and "Traceback" not in err


@pytest.mark.parametrize("draw, said", [
    ("~empirical(1, 2)", 'takes a file and a column: ~empirical("FILE", "COLUMN")'),
    ('~exp("data.csv", "len")', "takes 1 argument(s), not a file and a column"),
])
def test_the_wrong_arguments_are_refused(tmp_path, capsys, draw, said):
    path = write(tmp_path, PROGRAM.replace('~empirical("data.csv", "len")', draw))
    assert main(["run", str(path)]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"{path}:6:") and said in err


def test_pyserq_is_not_given_it(tmp_path):
    path = write(tmp_path)
    program, _ = compile_source(path.read_text(), str(path))
    with pytest.raises(ProgramError, match=r"~empirical"):
        encode_for_pyserq(program)
