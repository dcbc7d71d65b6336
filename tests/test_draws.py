"""serq-ref's draws beyond seed 002's (docs/design/draws.md): `~lognormal(mean,
cv)` and `~normal(mean, sd)` against their closed-form mean and variance,
their stream positions, their bad arguments, and a program that uses them
through the front end, fmt, the IR's schema and codec; pyserq refuses them."""

from __future__ import annotations

import math
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

PROGRAM = """\
stage server : fifo(1);
workload {
  arrive poisson(0.5);
}
session {
  set x = ~lognormal(1, 0.5);
  set y = ~normal(2, 1);
  run server (x);
  observe lx = x;
  observe ny = y;
  end;
}
run { horizon 200; seed 3; }
"""


def draws(dist: str, args: list[float], n: int, seed: int = 11) -> tuple[list[float], int]:
    stream = derive_stream(seed, ("test", dist))
    values, position = [], 0
    for _ in range(n):
        value, position = sample_distribution(dist, args, stream, position)
        values.append(value)
    return values, position


#: (dist, args, closed-form mean, closed-form variance)
CASES = [
    ("Lognormal", [2.0, 0.5], 2.0, 1.0),
    ("Lognormal", [100.0, 1.5], 100.0, 22500.0),
    ("Normal", [3.0, 2.0], 3.0, 4.0),
    ("Normal", [-1.0, 0.25], -1.0, 0.0625),
]


def check_moments(dist, args, mean, variance, n):
    values, position = draws(dist, args, n)
    assert position == 2 * n  # two uniform numbers a draw, whatever the values
    m, v = statistics.fmean(values), statistics.variance(values)
    sd = math.sqrt(variance)
    # the sample mean within 5 standard errors; the variance within 5 of its
    # standard errors, from the fourth central moment of the distribution
    assert abs(m - mean) < 5 * sd / math.sqrt(n), (m, mean)
    if dist == "Normal":
        fourth = 3 * variance ** 2
    else:
        s2 = math.log1p((args[1]) ** 2)
        kurtosis = math.exp(4 * s2) + 2 * math.exp(3 * s2) + 3 * math.exp(2 * s2) - 6  # excess
        fourth = (kurtosis + 3) * variance ** 2
    assert abs(v - variance) < 5 * math.sqrt((fourth - variance ** 2) / n), (v, variance)
    if dist == "Lognormal":
        assert min(values) > 0


@pytest.mark.parametrize("dist, args, mean, variance", CASES)
def test_the_closed_form_mean_and_variance(dist, args, mean, variance):
    check_moments(dist, args, mean, variance, 20_000)


@pytest.mark.campaign
@pytest.mark.parametrize("dist, args, mean, variance", CASES)
def test_the_closed_form_mean_and_variance_at_a_million(dist, args, mean, variance):
    check_moments(dist, args, mean, variance, 1_000_000)


def test_a_cv_of_zero_is_the_mean_and_the_draws_are_the_streams():
    values, _ = draws("Lognormal", [5.0, 0.0], 10)
    assert all(math.isclose(x, 5.0, rel_tol=1e-12) for x in values)
    assert draws("Normal", [0.0, 1.0], 50)[0] == draws("Normal", [0.0, 1.0], 50)[0]
    assert draws("Normal", [0.0, 1.0], 50, seed=12)[0] != draws("Normal", [0.0, 1.0], 50)[0]


def test_a_program_draws_them_and_fmt_schema_and_codec_keep_them():
    program, _ = compile_source(PROGRAM, "draws.sq")
    samples = [e for block in program.blocks for s in block for e in _exprs(s) if isinstance(e, ir.Sample)]
    assert [(s.dist, len(s.args)) for s in samples] == [("Lognormal", 2), ("Normal", 2)]
    encoded = codec.encode_program(program)
    validate(encoded)
    assert codec.decode_program(encoded) == program
    formatted = format_text(PROGRAM, "draws.sq")
    assert "~lognormal(1, 0.5)" in formatted and "~normal(2, 1)" in formatted
    assert compile_source(formatted, "draws.sq")[0] == program


def _exprs(node):
    return (n for n in ir.walk(node) if isinstance(n, ir.Sample))


def test_a_run_of_them_is_its_closed_forms(capsys, tmp_path):
    path = tmp_path / "draws.sq"
    path.write_text(PROGRAM.replace("horizon 200", "horizon 4000"))
    assert main(["run", str(path), "--json"]) == 0
    import json

    report = json.loads(capsys.readouterr().out)
    lx, ny = report["observes"]["lx"], report["observes"]["ny"]
    assert abs(lx["mean"] - 1.0) < 0.06 and abs(lx["cv2"] - 0.25) < 0.06
    assert abs(ny["mean"] - 2.0) < 0.12 and abs(ny["cv2"] * ny["mean"] ** 2 - 1.0) < 0.2


@pytest.mark.parametrize("draw, said", [
    ("~lognormal(0, 1)", "~lognormal(mean, cv) is ~lognormal(0, 1): the mean must be a finite number above 0"),
    ("~lognormal(1, -1)", "~lognormal(mean, cv) is ~lognormal(1, -1)"),
    ("~normal(1, -2)", "~normal(mean, sd) is ~normal(1, -2): the mean must be finite and the standard deviation"),
])
def test_bad_arguments_are_a_located_run_error(capsys, tmp_path, draw, said):
    path = tmp_path / "bad.sq"
    path.write_text(PROGRAM.replace("~lognormal(1, 0.5)", draw).replace("~normal(2, 1)", "1")
                    if "lognormal" in draw else PROGRAM.replace("~normal(2, 1)", draw))
    assert main(["run", str(path)]) == 1
    err = capsys.readouterr().err
    line = 6 if "lognormal" in draw else 7
    assert err.startswith(f"{path}:{line}:") and said in err and "Traceback" not in err


def test_pyserq_is_not_given_them():
    program, _ = compile_source(PROGRAM, "draws.sq")
    with pytest.raises(ProgramError, match=r"draws ~lognormal, ~normal, serq-ref's extension of IR v13"):
        encode_for_pyserq(program)
