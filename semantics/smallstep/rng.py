"""Random streams of a run: counter-based, so a stream's state is one integer.

Seed 002 §3 (Workload): "Random draws use separate streams for arrivals,
workload, the session and eviction." A stream is named by a tuple
(``("arrivals",)``, ``("session", serial)``, ``("turn", serial, turn_no)``,
``("workload",)``, ``("machine",)``); its k-th uniform number is a hash of
(seed, name, k) by BLAKE2b. The configuration keeps only each stream's
position k, so drawing is a pure function of the configuration and a
configuration stays an immutable value. Python's salted ``hash()`` is never
used: the same seed gives the same draws in every process.
"""

from __future__ import annotations

import hashlib
import math
import struct

_PACK_POSITION = struct.Struct("<Q").pack
_SCALE = 2.0**-53


def derive_stream(seed: int, name: tuple) -> bytes:
    """The key of the stream ``name`` under ``seed`` (16 bytes)."""
    text = repr((int(seed),) + tuple(name)).encode()
    return hashlib.blake2b(text, digest_size=16).digest()


def draw_uniform(stream: bytes, position: int) -> float:
    """The uniform number in [0, 1) at ``position`` of ``stream``."""
    digest = hashlib.blake2b(stream + _PACK_POSITION(position), digest_size=8).digest()
    return (int.from_bytes(digest, "little") >> 11) * _SCALE


def sample_distribution(dist: str, args: list[float], stream: bytes, position: int) -> tuple[float, int]:
    """One draw of ``~dist(args)``: (value, the stream's next position).

    exp(mean), det(x), uniform(lo, hi), erlang(k, mean) (a sum of k
    exponentials of mean mean/k), h2(mean, cv2) (two exponential phases with
    balanced means; cv2 below 1 is read as 1, the exponential), bernoulli(p).
    """
    if dist == "Det":
        return args[0], position
    if dist == "Exp":
        u = draw_uniform(stream, position)
        return -args[0] * math.log1p(-u), position + 1
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
    raise ValueError(f"unknown distribution {dist}")
