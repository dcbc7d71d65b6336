"""Random streams of a run: counter-based, so a stream's state is one integer.

Seed 002 §3 (Workload): "Random draws use separate streams for arrivals,
workload, the session and eviction." A stream is named by a tuple
(``("arrivals",)``, ``("session", serial)``, ``("turn", serial, turn_no)``,
``("workload",)``, ``("machine",)``) and keyed by a 64-bit number: BLAKE2b of
(seed, name), except that the session streams, one per arriving session, are
keyed by the SplitMix64 sequence of the key of ``("session",)`` at the
session's serial (cheaper than a hash per session, and as separate). The k-th
uniform number of a stream is SplitMix64's output at counter k + 1 from its
key (Steele, Lea and Flood, "Fast splittable pseudorandom number
generators", OOPSLA 2014: the golden-gamma increment and the 64-bit finaliser),
its top 53 bits scaled to [0, 1). The configuration keeps only each stream's
position k, so drawing is a pure function of the configuration and a
configuration stays an immutable value. Python's salted ``hash()`` is never
used: the same seed gives the same draws in every process.
"""

from __future__ import annotations

import hashlib
import math

_MASK = (1 << 64) - 1
_GAMMA = 0x9E3779B97F4A7C15
_SCALE = 2.0**-53


def derive_stream(seed: int, name: tuple) -> int:
    """The key of the stream ``name`` under ``seed`` (a 64-bit number)."""
    text = repr((int(seed),) + tuple(name)).encode()
    return int.from_bytes(hashlib.blake2b(text, digest_size=8).digest(), "little")


def stream_bits(key: int, k: int) -> int:
    """The 64-bit number at counter ``k`` of the stream keyed by ``key``:
    SplitMix64's finaliser (a bijection that scatters every input bit) of the
    key plus k + 1 golden gammas."""
    z = (key + (k + 1) * _GAMMA) & _MASK
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & _MASK
    return z ^ (z >> 31)


#: The key of member ``index`` of a family of streams keyed by ``family``
#: (session ``serial``'s stream: the family ``("session",)``): the family's number at counter ``index``.
member_stream = stream_bits


def draw_uniform(stream: int, position: int) -> float:
    """The uniform number in [0, 1) at ``position`` of ``stream``: the top 53 bits of its number there."""
    return (stream_bits(stream, position) >> 11) * _SCALE


def sample_exp(mean: float, stream: int, position: int) -> float:
    """``~exp(mean)`` by inversion of the uniform number at ``position``:
    ``-mean * log1p(-draw_uniform(stream, position))``, with ``draw_uniform``
    and ``stream_bits`` written out here (the commonest draw of a run, and
    every Poisson arrival's gap; tests/test_smallstep_rng.py checks it is
    that expression bit for bit)."""
    z = (stream + (position + 1) * 0x9E3779B97F4A7C15) & 0xFFFFFFFFFFFFFFFF
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & 0xFFFFFFFFFFFFFFFF
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & 0xFFFFFFFFFFFFFFFF
    return -mean * _log1p(-((z ^ (z >> 31)) >> 11) * 1.1102230246251565e-16)


_log1p = math.log1p


def sample_distribution(dist: str, args: list[float], stream: int, position: int) -> tuple[float, int]:
    """One draw of ``~dist(args)``: (value, the stream's next position).

    exp(mean), det(x), uniform(lo, hi), erlang(k, mean) (a sum of k
    exponentials of mean mean/k), h2(mean, cv2) (two exponential phases with
    balanced means), bernoulli(p); serq-ref's extension (docs/design/draws.md):
    lognormal(mean, cv) (exp of a normal of sigma^2 = ln(1 + cv^2), mu =
    ln(mean) - sigma^2 / 2: mean ``mean``, standard deviation ``cv * mean``),
    normal(mean, sd) (any sign), empirical(v1, ..., vn) (one of the values, each
    with probability 1/n, by one uniform number). The arguments are in their ranges
    (arithmetic.describe_draw_problem: the link checks the constant ones, the
    run every other before it draws).
    """
    if dist == "Det":
        return args[0], position
    if dist == "Exp":
        return sample_exp(args[0], stream, position), position + 1
    if dist == "Uniform":
        u = draw_uniform(stream, position)
        return args[0] + (args[1] - args[0]) * u, position + 1
    if dist == "Bernoulli":
        u = draw_uniform(stream, position)
        return (1.0 if u < args[0] else 0.0), position + 1
    if dist == "Erlang":
        phases = max(1, int(args[0]))
        phase_mean = args[1] / phases
        total = 0.0
        for _ in range(phases):
            total += -phase_mean * math.log1p(-draw_uniform(stream, position))
            position += 1
        return total, position
    if dist == "H2":
        mean, cv2 = args[0], max(1.0, args[1])
        first = 0.5 * (1.0 + math.sqrt((cv2 - 1.0) / (cv2 + 1.0)))
        u = draw_uniform(stream, position)
        phase_mean = mean / (2.0 * first) if u < first else mean / (2.0 * (1.0 - first))
        v = draw_uniform(stream, position + 1)
        return -phase_mean * math.log1p(-v), position + 2
    if dist == "Lognormal":
        mean, cv = args
        sigma2 = math.log1p(cv * cv)
        z, position = standard_normal(stream, position)
        return math.exp(math.log(mean) - 0.5 * sigma2 + math.sqrt(sigma2) * z), position
    if dist == "Normal":
        z, position = standard_normal(stream, position)
        return args[0] + args[1] * z, position
    if dist == "Empirical":  # one of the column's values, each as likely: index floor(u n)
        return args[min(len(args) - 1, int(draw_uniform(stream, position) * len(args)))], position + 1
    raise ValueError(f"unknown distribution {dist}")


def standard_normal(stream: int, position: int) -> tuple[float, int]:
    """A standard normal number from the uniform numbers at ``position`` and
    ``position + 1`` (Box and Muller, 1958, the cosine of the pair: one
    normal per two uniforms, so a draw's stream positions do not depend on
    what an earlier draw was): ``sqrt(-2 ln(1 - u1)) cos(2 pi u2)``."""
    u1 = draw_uniform(stream, position)
    u2 = draw_uniform(stream, position + 1)
    return math.sqrt(-2.0 * math.log1p(-u1)) * math.cos(2.0 * math.pi * u2), position + 2
