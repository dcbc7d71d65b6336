"""Queueing models with closed-form answers, as serQ IR, and those answers.

Seed 002, section 5, lists the programs serQ is checked against closed forms
with: M/G/1 FIFO, M/G/1-PS and M/M/1//N (M/M/1 sojourn, Pollaczek-Khinchine
for four laws, PS insensitivity, mean value analysis). This module builds
those programs directly as IR values (``semantics.ir``), without the parser,
so that the small-step semantics can be checked on them whatever state the
front end is in, and computes the exact answers the runs are held to.

Every program times the sojourn the way the reference's examples do: a
session sets ``t0 = now`` before its ``run`` and observes ``now - t0`` after
it; the service it drew is kept in an attribute ``s`` so that the wait
``now - t0 - s`` is observed too.

Builders are functions ``build_*`` returning an ``ir.Program``; exact values
are functions ``calculate_*``; ``SERVICE_LAWS`` names the four service laws of
mean 1 the Pollaczek-Khinchine check uses, with their second moments.
"""

from __future__ import annotations

import math
from typing import NamedTuple

from semantics import ir

# --------------------------------------------------------------------------
# Slots: the nine built-in attributes first (FORMAT.md, Program), then ours

#: The attribute slots the builders give their own attributes.
SLOT_T0 = len(ir.BUILTIN_ATTRS)
SLOT_SERVICE = SLOT_T0 + 1

#: The built-in attributes' types, in slot order, as the reference's compiler
#: writes them (cached and computed are values, the rest sizes).
BUILTIN_TYPES = ("Value", "Size", "Size", "Size", "Size", "Size", "Size", "Size", "Value")

#: Observation indices (into ``Program.observes``) the builders use.
OBSERVES = ("response", "wait")
OBSERVE_RESPONSE = 0
OBSERVE_WAIT = 1


class ServiceLaw(NamedTuple):
    """A service-time law of mean 1: its name, the IR draw, and E[S^2]."""

    name: str
    sample: ir.Expr
    second_moment: float


def make_number(value: float) -> ir.Num:
    return ir.Num(float(value))


def make_sample(dist: str, *args: float) -> ir.Sample:
    return ir.Sample(dist, tuple(make_number(a) for a in args))


#: Service laws of mean 1 (seed 002, Expressions: ~det(x), ~exp(mean),
#: ~erlang(k, mean), ~h2(mean, cv2)); E[S^2] = (1 + cv2) E[S]^2: cv2 is 0, 1,
#: 1/4 and 4, so E[S^2] = 1, 2, 1.25, 5 (the issue's list).
SERVICE_LAWS: dict[str, ServiceLaw] = {
    "deterministic": ServiceLaw("deterministic", make_sample("Det", 1.0), 1.0),
    "exponential": ServiceLaw("exponential", make_sample("Exp", 1.0), 2.0),
    "erlang4": ServiceLaw("erlang4", make_sample("Erlang", 4.0, 1.0), 1.25),
    "h2": ServiceLaw("h2", make_sample("H2", 1.0, 4.0), 5.0),
}


# --------------------------------------------------------------------------
# IR pieces


def make_stage_ref(index: int) -> ir.Ref:
    """A single stage (a family of one), by its index in ``Program.stages``."""
    return ir.Ref(base=index, count=1, index=None)


def make_cost(stage: int, expr: ir.Expr) -> ir.Cost:
    """``cost(stage, expr)``: expr's value, measured in the stage's unit."""
    return ir.Cost(ir.CostTarget("Stage", stage, 1), expr)


def make_sojourn_statements(stage: int) -> tuple[tuple[ir.Stmt, str], ...]:
    """``set t0 = now; run STAGE (s); observe response = now - t0;
    observe wait = now - t0 - s;`` with each statement's side (the sets are
    the client's, the run and what it measures the server's)."""
    now = ir.Ctx("Now")
    response = ir.Binary("Sub", now, ir.Attr(SLOT_T0))
    return (
        (ir.Set(SLOT_T0, now), "Workload"),
        (ir.Run(make_stage_ref(stage), "Plain", make_cost(stage, ir.Attr(SLOT_SERVICE)), None), "Server"),
        (ir.Observe(OBSERVE_RESPONSE, response), "Server"),
        (ir.Observe(OBSERVE_WAIT, ir.Binary("Sub", response, ir.Attr(SLOT_SERVICE))), "Server"),
    )


def assemble_program(
    *,
    stages: tuple[ir.Stage, ...],
    arrival: ir.Arrival,
    session: tuple[tuple[tuple[ir.Stmt, str], ...], ...],
    horizon: float,
    warmup: float,
    seed: int,
) -> ir.Program:
    """A program of the builders' shape: empty ``init`` and ``turn`` blocks
    (blocks 0 and 1), the session's blocks from block 2 on (the first is the
    session's), the attributes ``t0`` (a time) and ``s`` (a plain number the
    client draws; the server's ``run`` converts it with ``cost(svc, s)``, as
    the reference's examples do), both typed ``Size`` (pyserq refuses a
    workload-side set of any other type, or of a cost), and the observations
    ``response`` and ``wait``."""
    blocks = ((), ()) + tuple(tuple(stmt for stmt, _ in block) for block in session)
    sides = ((), ()) + tuple(tuple(side for _, side in block) for block in session)
    return ir.Program(
        version=ir.IR_VERSION,
        attrs=ir.BUILTIN_ATTRS + ("t0", "s"),
        attr_types=BUILTIN_TYPES + ("Size", "Size"),
        sides=sides,
        observes=OBSERVES,
        pools=(),
        stages=stages,
        arrival=arrival,
        trace=None,
        trace_ordered=False,
        init=0,
        turn=1,
        session=2,
        blocks=blocks,
        horizon=float(horizon),
        warmup=float(warmup),
        seed=seed,
        arrivals=None,
        **ir.BUILTIN_SLOTS,
        hidden=(),
        share=None,
        gauges=(),
    )


# --------------------------------------------------------------------------
# The programs


def build_open_program(
    kind: ir.StageKind, rate: float, service: ir.Expr, *, horizon: float, warmup: float, seed: int
) -> ir.Program:
    """Poisson sessions at ``rate``, each drawing ``service`` and running it
    once on the one stage ``svc`` of ``kind``:

        stage svc : KIND;
        workload { arrive poisson(RATE); }
        session { set s = SERVICE; set t0 = now; run svc (s);
                  observe response = now - t0; observe wait = now - t0 - s; }
    """
    statements = ((ir.Set(SLOT_SERVICE, service), "Workload"),) + make_sojourn_statements(0)
    return assemble_program(
        stages=(ir.Stage("svc", None, kind),),
        arrival=ir.Poisson(float(rate)),
        session=(statements,),
        horizon=horizon,
        warmup=warmup,
        seed=seed,
    )


def build_fifo_program(
    rate: float, service: ir.Expr, *, servers: int = 1, horizon: float, warmup: float, seed: int
) -> ir.Program:
    """M/G/c FIFO: ``stage svc : fifo(SERVERS);`` under Poisson arrivals."""
    return build_open_program(ir.Fifo(servers), rate, service, horizon=horizon, warmup=warmup, seed=seed)


def build_ps_program(rate: float, service: ir.Expr, *, horizon: float, warmup: float, seed: int) -> ir.Program:
    """M/G/1-PS: ``stage svc : ps(1);`` (every job at 1/present)."""
    return build_open_program(ir.Ps(make_number(1.0)), rate, service, horizon=horizon, warmup=warmup, seed=seed)


def build_closed_program(
    population: int, think: float, service_rate: float, *, horizon: float, warmup: float, seed: int
) -> ir.Program:
    """M/M/1//N with think time: ``population`` sessions that loop forever

        stage svc : fifo;  stage think : delay;
        workload { arrive closed(N); }
        session { loop { run think (~exp(Z)); set s = ~exp(1 / mu);
                         set t0 = now; run svc (s);
                         observe response = now - t0; observe wait = now - t0 - s; } }

    ``delay`` is ``ps(present)`` in IR v13 (FORMAT.md, Stage)."""
    think_stage = ir.Stage("think", None, ir.Ps(ir.Ctx("N")))
    loop_body = (
        (ir.Run(make_stage_ref(1), "Plain", make_cost(1, make_sample("Exp", think)), None), "Workload"),
        (ir.Set(SLOT_SERVICE, make_sample("Exp", 1.0 / service_rate)), "Workload"),
    ) + make_sojourn_statements(0)
    return assemble_program(
        stages=(ir.Stage("svc", None, ir.Fifo(1)), think_stage),
        arrival=ir.Closed(population),
        session=(((ir.Loop(3), "Workload"),), loop_body),
        horizon=horizon,
        warmup=warmup,
        seed=seed,
    )


# --------------------------------------------------------------------------
# Exact answers


def calculate_mm1_sojourn(rate: float, service_rate: float) -> float:
    """M/M/1 mean sojourn: 1 / (mu - lambda)."""
    assert rate < service_rate
    return 1.0 / (service_rate - rate)


def calculate_mm1_number(rate: float, service_rate: float) -> float:
    """M/M/1 mean number present: rho / (1 - rho)."""
    rho = rate / service_rate
    return rho / (1.0 - rho)


def calculate_pk_wait(rate: float, mean_service: float, second_moment: float) -> float:
    """Pollaczek-Khinchine mean wait in queue of M/G/1 FIFO:
    lambda E[S^2] / (2 (1 - rho)), rho = lambda E[S]."""
    rho = rate * mean_service
    assert rho < 1.0
    return rate * second_moment / (2.0 * (1.0 - rho))


def calculate_erlang_c(servers: int, offered: float) -> float:
    """Erlang C: the probability an arrival waits in M/M/c with offered load
    a = lambda / mu < c."""
    assert offered < servers
    head = sum(offered**k / math.factorial(k) for k in range(servers))
    tail = offered**servers / math.factorial(servers) * servers / (servers - offered)
    return tail / (head + tail)


def calculate_mmc_wait(servers: int, rate: float, service_rate: float) -> float:
    """M/M/c mean wait in queue: C(c, a) / (c mu - lambda)."""
    return calculate_erlang_c(servers, rate / service_rate) / (servers * service_rate - rate)


class MeanValues(NamedTuple):
    """Mean value analysis of one FIFO server with a think (delay) station."""

    throughput: float
    response: float  # mean time at the server, waiting and service
    number: float  # mean number at the server


def calculate_mva(population: int, think: float, service_rate: float) -> MeanValues:
    """Exact MVA for ``population`` sessions, think time Z, one exponential
    server of rate mu: R(n) = (1 + Q(n-1)) / mu, X(n) = n / (R(n) + Z),
    Q(n) = X(n) R(n), from Q(0) = 0."""
    number = 0.0
    throughput = response = 0.0
    for n in range(1, population + 1):
        response = (1.0 + number) / service_rate
        throughput = n / (response + think)
        number = throughput * response
    return MeanValues(throughput, response, number)
