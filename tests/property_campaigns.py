"""The property campaigns as independent cases (``serq-ref property campaign
NAME``, semantics/property_campaign.py; docs/campaigns.md, "The property
campaigns on workers and Ray").

A campaign is a strategy of the project's generators and a property; its case
``SEED/INDEX`` is one program drawn from a ``random.Random`` seeded with the
text ``"SEED/INDEX"`` and judged alone, so that any case can be drawn again by
itself, on any process, and the results of N cases are the same whichever
process ran which (the command runs them with ``semantics.workers.run_cases``).

Why not Hypothesis's own runner (``@given`` under ``@seed`` or
``derandomize``, a shard a run): what it generates depends on the whole run
(its first example is the simplest one, the later ones mutate the earlier
ones), so a case cannot be named and drawn alone, and the shards' programs
would depend on the shard size. Why Hypothesis's strategies all the same: they
are the generators the default suite's properties draw from
(tests/strategies.py, tests/warning_programs.py), and writing them again for a
``random.Random`` would be a second generator to keep in step with the first.
So a case is one draw of the strategy from a ``ConjectureData`` whose
provider reads the seeded ``random.Random`` (``draw``).

One thing of Hypothesis's provider is not a function of the random state: 5 %
of its draws of a number or a string take a constant, from Hypothesis's own
list or from the constants it finds in the source of the *local modules loaded
so far* (``providers._get_local_constants`` scans ``sys.modules``; Hypothesis
6.131 and later). A worker that has imported other modules than the driver (a
Ray worker, or one process that ran other cases first and so imported more of
the linker) would draw another program from the same seed. ``SeededProvider``
leaves the local constants out (Hypothesis's own list stays), so a case's
program is a function of its seed and index alone
(tests/test_property_campaign.py draws a case in two interpreters with
different modules loaded).

What is not kept of Hypothesis: shrinking. A failing case is reported with
its program and its label; ``serq-ref property campaign NAME --seed S --cases
I`` draws it again, and the default suite's property (the same property,
under ``@given``) shrinks what it finds.

A case's result is JSON (the journal of ``--resume`` records it): the
program's features, what the property counted, and for a failure its message
and program. ``summary`` folds the results, in case order, into the record.
"""

from __future__ import annotations

import collections
import hashlib
import json
import random
import re
import tempfile
from typing import Any, Callable, NamedTuple

from hypothesis.control import BuildContext
from hypothesis.errors import StopTest
from hypothesis.internal.conjecture.data import ConjectureData
from hypothesis.internal.conjecture.providers import Constants, HypothesisProvider

#: Draws of a case before it is given up (a draw Hypothesis marks invalid, a filter that never passed, is
#: drawn again from the stream "SEED/INDEX/ATTEMPT"): a strategy that needed them all is a generator's bug.
ATTEMPTS = 20


class SeededProvider(HypothesisProvider):
    """Hypothesis's provider without the constants of the local modules loaded (module docstring)."""

    @property
    def _local_constants(self):
        return Constants()


def draw(strategy, seed: int, index: int) -> Any:
    """Case ``index`` of ``seed``: one value of ``strategy`` drawn from ``random.Random("SEED/INDEX")``
    (the string seeds the same state in every process: random's seeding of a str is its SHA-512)."""
    for attempt in range(ATTEMPTS):
        key = f"{seed}/{index}" + (f"/{attempt}" if attempt else "")
        data = ConjectureData(random=random.Random(key), provider=SeededProvider)
        try:
            with BuildContext(data, is_final=False, wrapped_test=draw):  # a mapped strategy records its call here
                return data.draw(strategy)
        except StopTest:
            continue
    raise RuntimeError(f"case {seed}/{index}: no valid draw in {ATTEMPTS} attempts (a generator that filters "
                       "out almost everything)")


#: a temporary directory's path in a message (the programs are loaded from files in one): left out, so that a
#: failure's message is the same bytes on every process
_TEMPORARY = re.compile(re.escape(tempfile.gettempdir().rstrip("/")) + r"/[^/\s:]+/")


def message_of(e: BaseException) -> str:
    text = str(e).strip() or type(e).__name__
    return f"{type(e).__name__}: {_TEMPORARY.sub('', text)}"


# --------------------------------------------------------------------------
# properties: tests/test_properties.py's, on every program of tests/strategies.py
# --------------------------------------------------------------------------


def properties_strategy():
    import test_properties

    return test_properties.ANY


def properties_case(loaded) -> dict:
    """test_property_campaign's body on one program: the IR's round trip, the trace twice, every rule's
    configuration held to RunInvariants, settle idempotent; a tolerated RunError (the program's own,
    PROGRAM_RUN_ERRORS) is an outcome."""
    from semantics.errors import RunStop
    from test_properties import (PROGRAM_RUN_ERRORS, check_every_step, happenings, ir_round_trip,
                                 same_seed_same_trace, settle_is_idempotent)

    result: dict = {"features": sorted(loaded.generated.features)}
    assert loaded.program is not None, f"a generated program does not link: {loaded.error}"
    program = loaded.program
    ir_round_trip(program)
    same_seed_same_trace(program)
    try:
        count, last, left = check_every_step(program)
        result["rules"] = count
        result["runs_with"] = sorted(what for what, n in happenings(last).items() if n > 0)
        settle_is_idempotent(program)
    except RunStop as e:
        phrase = next((p for p in PROGRAM_RUN_ERRORS if p in e.message), None)
        if phrase is None:
            raise
        result["outcome"] = f"stopped: {phrase}"
        return result
    rejected = sum(p.rejected for p in last.statistics.pools)
    assert rejected <= left, "more sessions rejected than left (a rejection ends its session)"
    result["outcome"] = "ran to the end"
    return result


def properties_text(loaded) -> str:
    return loaded.generated.text


def properties_summary(results: list[dict]) -> dict:
    from strategies import FEATURES

    outcomes: collections.Counter = collections.Counter()
    runs_with: collections.Counter = collections.Counter()
    features: collections.Counter = collections.Counter()
    rules = 0
    for r in results:
        outcomes[r["outcome"]] += 1
        runs_with.update(r.get("runs_with", ()))
        features.update(r.get("features", ()))
        rules += r.get("rules", 0)
    return {"outcomes": dict(sorted(outcomes.items())), "rules_checked": rules,
            "runs_with": dict(sorted(runs_with.items())), "features": {f: features[f] for f in FEATURES}}


# --------------------------------------------------------------------------
# warnings: tests/test_warning_property.py's, on tests/warning_programs.py's programs
# --------------------------------------------------------------------------


def warnings_strategy():
    from warning_programs import deterministic_programs

    return deterministic_programs()


def warnings_case(program) -> dict:
    """No fault reached unwarned; in the strict fragment no warning unreached (test_warning_property.check)."""
    from test_warning_property import judge

    counts: collections.Counter = collections.Counter()
    false, missed = judge(program, counts)
    failures = missed + (false if program.strict else [])
    assert not failures, "\n".join(failures)
    return {"features": sorted(program.features), "counts": dict(sorted(counts.items())), "outcome": "held"}


def warnings_text(program) -> str:
    return program.text


def warnings_summary(results: list[dict]) -> dict:
    counts: collections.Counter = collections.Counter()
    features: collections.Counter = collections.Counter()
    outcomes: collections.Counter = collections.Counter()
    for r in results:
        outcomes[r["outcome"]] += 1
        counts.update(r.get("counts", {}))
        features.update(r.get("features", ()))
    return {"outcomes": dict(sorted(outcomes.items())), "counts": dict(sorted(counts.items())),
            "features": dict(sorted(features.items()))}


# --------------------------------------------------------------------------
# the campaigns
# --------------------------------------------------------------------------


class Campaign(NamedTuple):
    #: what it checks, for the command's help
    title: str
    #: the strategy (made when first needed: it imports the generators)
    strategy: Callable[[], Any]
    #: the property on a drawn value: its result (JSON), or an exception
    check: Callable[[Any], dict]
    #: the drawn value's program text (shown with a failure)
    text: Callable[[Any], str]
    #: the results folded into the record, in case order
    summary: Callable[[list[dict]], dict]


CAMPAIGNS = {
    "properties": Campaign("every rule's configuration holds RunInvariants, settle is idempotent, the same seed gives "
                           "the same trace, the IR round-trips (tests/test_properties.py)",
                           properties_strategy, properties_case, properties_text, properties_summary),
    "warnings": Campaign("a warning exactly where a run reaches a fault (tests/test_warning_property.py)",
                         warnings_strategy, warnings_case, warnings_text, warnings_summary),
}

_strategies: dict[str, Any] = {}


def case(name: str, seed: int, index: int) -> dict:
    """Case ``seed/index`` of campaign ``name``: its result (JSON); a property that does not hold, or any
    exception the draw or the check raised, is the outcome ``failed`` with the message and the program."""
    campaign = CAMPAIGNS[name]
    if name not in _strategies:
        _strategies[name] = campaign.strategy()
    value = None
    try:
        value = draw(_strategies[name], seed, index)
        return campaign.check(value)
    except Exception as e:  # noqa: BLE001 - every failure of a case is its result, reported with its label
        result = {"outcome": "failed", "failure": message_of(e)}
        if value is not None:
            result["program"] = campaign.text(value)
        return result


def digest(result: dict) -> str:
    """A case's result as 12 hex digits (the record keeps these, so that a case can be drawn again and
    compared without keeping every result)."""
    text = json.dumps(result, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:12]
