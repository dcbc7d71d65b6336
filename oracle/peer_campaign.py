"""The peer campaign: generated deterministic programs (oracle/peer_programs.py)
run by serq-ref and pyserq, every disagreement minimised and attributed
(``serq-ref peer campaign N --seed S``; docs/campaigns.md, "serq-ref against
pyserq on generated programs").

Program k of a campaign is drawn from ``random.Random(f"{seed}/{k}")``, so any
one of them is reproduced alone (``program_at``). Each ends in one of:

- ``agree``: every figure docs/peer.md compares is the same;
- ``differ``: a figure differs; attributed to a known divergence
  (oracle/peer_known.py) or unexplained;
- ``error here``: serq-ref stops with a run-time error, pyserq runs it;
- ``error there``: pyserq refuses or stops, serq-ref runs it;
- ``error both``: both stop (not a disagreement).

Every disagreement is minimised greedily (``minimise``): the first one-change
simplification (``peer_programs.simpler``) that still disagrees the same way
is taken, until none does or the budget of tries is spent. The result is
data with no times or dates: the same for the same code, seed and count.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from typing import Callable

from oracle import peer, peer_known, peer_programs
from semantics import ir
from semantics.errors import SerqError


@dataclass(frozen=True)
class Outcome:
    status: str  # agree, differ, error here, error there, error both
    detail: tuple[str, ...]  # the differences, or the error message
    known: str | None = None  # the known divergence a difference is attributed to

    @property
    def key(self) -> str:
        """The class of a disagreement: the known divergence, or the status."""
        if self.status == "differ":
            return self.known or "unexplained"
        return self.status


def _first_line(e: Exception) -> str:
    return str(e).splitlines()[0] if str(e) else type(e).__name__


def run_program(program: ir.Program, attribute: bool = True) -> Outcome:
    """Both engines on ``program``."""
    here = there = None
    error_here = error_there = None
    try:
        here = peer.figures_here(program)
    except SerqError as e:
        error_here = _first_line(e)
    try:
        there = peer.figures_on_pyserq(program)
    except ValueError as e:  # pyserq's refusals and run-time errors
        error_there = _first_line(e)
    if error_here and error_there:
        return Outcome("error both", (error_here, error_there))
    if error_here:
        return Outcome("error here", (error_here,))
    if error_there:
        return Outcome("error there", (error_there,))
    lines = tuple(peer.differences(here, there))
    if not lines:
        return Outcome("agree", ())
    known = None
    if attribute:
        def differ(p: ir.Program) -> tuple[str, ...]:
            outcome = run_program(p, attribute=False)
            if outcome.status.startswith("error"):
                raise ValueError(outcome.detail[0])
            return outcome.detail

        found = peer_known.attribute(program, differ, lines)
        known = found.id if found else None
    return Outcome("differ", lines, known)


def outcome_of(program: dict) -> Outcome:
    try:
        built = peer_programs.build(program)
    except SerqError as e:  # a simplification the front end refuses
        return Outcome("invalid", (_first_line(e),))
    return run_program(built)


def program_at(seed: int, k: int) -> dict:
    return peer_programs.random_program(random.Random(f"{seed}/{k}"))


def minimise(program: dict, outcome: Outcome, budget: int = 150) -> tuple[dict, Outcome]:
    """A locally minimal program that disagrees as ``outcome`` does (the same
    class: the same known divergence, unexplained, or the same engine's
    error), trying at most ``budget`` simplifications."""
    current, current_outcome, tries = program, outcome, 0
    progress = True
    while progress and tries < budget:
        progress = False
        for candidate in peer_programs.simpler(current):
            tries += 1
            result = outcome_of(candidate)
            if result.key == outcome.key:
                current, current_outcome, progress = candidate, result, True
                break
            if tries >= budget:
                break
    return current, current_outcome


def program_case(seed: int, minimise_budget: int, k: int) -> dict:
    """Program ``k`` of seed ``seed`` on both engines: its status, what stopped
    both (numbers masked), its features and, for a disagreement, its entry
    with the minimal program (a case of ``semantics.workers.run_cases``: JSON)."""
    program = program_at(seed, k)
    outcome = outcome_of(program)
    result = {"status": outcome.status, "features": list(peer_programs.features(program))}
    if outcome.status == "error both":  # what stopped both: the messages, numbers masked
        result["both"] = " | ".join(re.sub(r"[0-9]+(\.[0-9]+)?", "N", line) for line in outcome.detail)
    if outcome.status in ("differ", "error here", "error there"):
        small, small_outcome = minimise(program, outcome, minimise_budget)
        result["entry"] = {"index": k, "class": outcome.key, "first": list(outcome.detail[:2]),
                           "minimal": peer_programs.render(small), "sessions": small["sessions"],
                           "minimal_first": list(small_outcome.detail[:3])}
    return result


def campaign(seed: int, count: int, progress: Callable[[int, int], None] | None = None,
             minimise_budget: int = 150, workers: int = 1, ray: str | None = None, resume: str | None = None,
             bar=None) -> dict:
    """``count`` programs of seed ``seed``; their outcomes, the features they
    exercised and, per class of disagreement, how many and the smallest
    minimal program. The programs are cases of ``semantics.workers.run_cases``
    (``workers`` processes, a Ray cluster ``ray``, a journal ``resume``;
    ``bar`` a ``CaseProgress``): the result is the same whichever."""
    import functools

    from semantics import SERQ_VERSION
    from semantics.workers import Journal, fingerprint, run_cases

    statuses: dict[str, int] = {}
    both_errors: dict[str, int] = {}
    features: dict[str, dict[str, int]] = {}
    classes: dict[str, dict] = {}
    disagreements = []
    journal = None
    if resume is not None:
        journal = Journal(resume, fingerprint("peer campaign", seed, count, minimise_budget, SERQ_VERSION), count)
    results = run_cases(functools.partial(program_case, seed, minimise_budget), list(range(count)), workers=workers,
                        ray=ray, progress=bar, journal=journal, labels=[f"program {seed}/{k}" for k in range(count)])
    try:
        for k, result in enumerate(results):
            status = result["status"]
            statuses[status] = statuses.get(status, 0) + 1
            if "both" in result:
                both_errors[result["both"]] = both_errors.get(result["both"], 0) + 1
            disagree = "entry" in result
            for name in result["features"]:
                counts = features.setdefault(name, {"programs": 0, "disagreed": 0})
                counts["programs"] += 1
                counts["disagreed"] += disagree
            if disagree:
                entry = result["entry"]
                disagreements.append(entry)
                c = classes.setdefault(entry["class"], {"count": 0})
                c["count"] += 1
                size = len(entry["minimal"])
                if "smallest" not in c or size < len(c["smallest"]["minimal"]):
                    c["smallest"] = {"index": k, "minimal": entry["minimal"], "sessions": entry["sessions"],
                                     "differences": entry["minimal_first"]}
            if progress:
                progress(k + 1, len(disagreements))
    finally:
        results.close()
        if journal is not None:
            journal.close()
    titles = {known.id: known.title for known in peer_known.KNOWN}
    for key, c in classes.items():
        parts = key.split("+")
        c["title"] = "; ".join(titles[p] for p in parts) if all(p in titles for p in parts) else key
    return {"seed": seed, "programs": count, "outcomes": dict(sorted(statuses.items())),
            "both_stopped": dict(sorted(both_errors.items())),
            "features": dict(sorted(features.items())), "classes": dict(sorted(classes.items())),
            "minimise_budget": minimise_budget, "disagreements": disagreements}
