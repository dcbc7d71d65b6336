"""A conformance adapter (docs/conformance.md): Vidur (github microsoft/vidur),
its `vllm` or `sarathi` replica scheduler, answers a vLLM scenario with its
execution-time predictor replaced by a constant, so that time is steps.

    $SERQ_VIDUR_PYTHON examples/adapters/vidur_adapter.py vllm|sarathi SCENARIO.json

It runs in Vidur's environment (examples/adapters/setup-vidur.sh builds it
outside the repository; $SERQ_VIDUR_SRC, default ../vidur-src beside the
repository, is Vidur's source tree) and imports nothing of serq-ref. Nothing
of Vidur is copied here: the adapter builds Vidur's own configuration
objects, cluster, global and replica schedulers and events, and runs Vidur's
own event loop (vidur/simulator.py, Simulator.run) over them. What it puts
in place of Vidur's parts, by configuration and by registering a class:

- the execution-time predictor: a class registered in Vidur's
  ExecutionTimePredictorRegistry under the key "constant" whose every batch
  stage takes 1 time unit (an ExecutionTime subclass whose total and model
  times are 1), so a batch scheduled at time t is step t + 1;
- the metrics store: one that records nothing (the events call it; the
  answer is read from Vidur's Request entities instead);
- Vidur's metrics, request-generator and predictor packages are not
  imported (they pull wandb, plotly, pandas and scikit-learn, seconds per
  case): stand-in modules named as they are hold the names the scheduler
  and event modules import from them.

The mapping. One replica, one pipeline stage, round-robin global scheduler.
The replica scheduler's `batch_size_cap` is `max_seqs`, `block_size` the
scenario's, `num_blocks` is `num_blocks - 1` (vLLM's count includes the null
block), `watermark_blocks_fraction` 0 (vLLM 0.33.0 reserves no watermark);
the token budget is the vllm scheduler's `max_tokens_in_batch` and the
sarathi scheduler's `chunk_size` (both `budget`). Request i is a Vidur
Request of `prompt` prefill and `out` decode tokens arriving at time
`arrive` (added after step `arrive`: Vidur handles a request arrival before
a batch end at the same time, vidur/types/event_type.py, so the batch that
starts then can take it). The answer: `first` a request's
prefill_completed_at, `done` its completed_at, `preemptions` the restarts
(Request.restart, a victim's recomputation), `steps` the last done + 1; a
request Vidur never completes is left out of `first` and `done`.

What Vidur lacks (answered "unsupported: ..."): a serve-by key or a
priority policy, asynchronous scheduling, prefix caching (Vidur's block
manager has no cache), a long-prefill token threshold that can bind,
max_model_len refusals and a watermark.

With SERQ_SCHEDULE_LOG set, the adapter writes its schedule log: each
batch's requests and tokens (prefill or decode), the requests restarted
(preempted) while that batch was formed (in no particular order: the log
says "unordered"), and the finishes.
"""
import json
import os
import sys
import tempfile
import types
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # peer_knobs beside this script, under any Python
import peer_knobs  # noqa: E402

SCHEDULERS = ("vllm", "sarathi")
LACKS = peer_knobs.Lacks(
    serve="Vidur's replica schedulers serve first come first served",
    priority="Vidur's requests have no priority",
    schedule="Vidur schedules a replica's next batch when one ends",
    threshold="Vidur's schedulers have",
    replay=("Vidur's requests arrive at times fixed before the run (its trace and synthetic generators), "
            "and its blocks cache no prefix for a session's next turn"))


def unsupported(scenario: dict) -> str | None:
    """Why Vidur cannot express ``scenario`` (None: it can)."""
    why = peer_knobs.unmapped(scenario, LACKS)
    if why is not None:
        return why
    if scenario.get("prefix_caching"):
        return "prefix caching: Vidur's replica schedulers count blocks and cache none"
    return peer_knobs.bounded(scenario, LACKS)


def vidur_source() -> Path:
    here = Path(__file__).resolve().parents[2]
    return Path(os.environ.get("SERQ_VIDUR_SRC") or here.parent / "vidur-src")


def _stand_ins() -> None:
    """Stand-in modules for the three packages of Vidur the scheduler path
    imports names from but the adapter does not use."""
    class NoMetrics:
        """A metrics store that records nothing: every ``on_…`` call is a no-op."""

        def __getattr__(self, name):
            return lambda *args, **kwargs: None

    class Registry:
        _registry: dict = {}

        @classmethod
        def register(cls, key, implementation):
            cls._registry[key] = implementation

        @classmethod
        def get(cls, key, *args, **kwargs):
            return cls._registry[key](*args, **kwargs)

    metrics = types.ModuleType("vidur.metrics")
    metrics.MetricsStore = NoMetrics
    predictor = types.ModuleType("vidur.execution_time_predictor")
    predictor.BaseExecutionTimePredictor = object
    predictor.ExecutionTimePredictorRegistry = type("ExecutionTimePredictorRegistry", (Registry,), {"_registry": {}})
    generator = types.ModuleType("vidur.request_generator")
    generator.RequestGeneratorRegistry = type("RequestGeneratorRegistry", (Registry,), {"_registry": {}})
    for module in (metrics, predictor, generator):
        sys.modules[module.__name__] = module


def simulate(scenario: dict, scheduler: str) -> tuple[list, dict]:
    """Vidur's run of the scenario: its Request entities in the requests'
    order, and the schedule log's steps (step -> record)."""
    sys.path.insert(0, str(vidur_source()))
    _stand_ins()
    import logging

    import vidur.logger  # noqa: F401  (its handler writes to standard output, where the answer goes)
    logging.getLogger("vidur").setLevel(logging.WARNING)
    from vidur import config as vc
    from vidur.entities import Cluster, ExecutionTime, Request
    from vidur.events import RequestArrivalEvent
    from vidur.execution_time_predictor import ExecutionTimePredictorRegistry
    from vidur.scheduler import GlobalSchedulerRegistry
    from vidur.simulator import Simulator

    class UnitTime(ExecutionTime):
        """A batch stage's execution time: 1, whatever the batch."""

        def __init__(self):
            super().__init__(*([1] + [0.0] * 19))

        @property
        def model_time(self) -> float:
            return 1.0

        @property
        def total_time(self) -> float:
            return 1.0

    class ConstantPredictor:
        def __init__(self, **kwargs):
            pass

        def get_execution_time(self, batch, pipeline_stage):
            return UnitTime()

    class ConstantPredictorConfig(vc.BaseExecutionTimePredictorConfig):
        @staticmethod
        def get_type():
            return "constant"

    ExecutionTimePredictorRegistry.register("constant", ConstantPredictor)

    budget = scenario["budget"]
    common = dict(batch_size_cap=scenario["max_seqs"], block_size=scenario["block_size"],
                  watermark_blocks_fraction=0.0, num_blocks=scenario["num_blocks"] - 1)
    if scheduler == "vllm":
        replica_scheduler = vc.VllmSchedulerConfig(max_tokens_in_batch=budget, **common)
    else:
        replica_scheduler = vc.SarathiSchedulerConfig(chunk_size=budget, **common)
    with tempfile.TemporaryDirectory(prefix="vidur-adapter-") as out:
        metrics = vc.MetricsConfig(write_metrics=False, write_json_trace=False, enable_chrome_trace=False,
                                   store_plots=False, output_dir=out, cache_dir=out)
        # the request generator's config only sizes a replica's memory plan (max_tokens), which the
        # vllm and sarathi schedulers do not use when num_blocks is given: its defaults, no trace read
        generator = vc.TraceRequestGeneratorConfig()
        cluster_config = vc.ClusterConfig(num_replicas=1, replica_config=vc.ReplicaConfig(),
                                          global_scheduler_config=vc.RoundRobinGlobalSchedulerConfig(),
                                          replica_scheduler_config=replica_scheduler)
        config = vc.SimulationConfig(cluster_config=cluster_config, request_generator_config=generator,
                                     execution_time_predictor_config=ConstantPredictorConfig(),
                                     metrics_config=metrics)
        cluster = Cluster(cluster_config, metrics, generator)
        simulator = Simulator.__new__(Simulator)  # Vidur's loop, without its __init__'s generator and output
        simulator._config, simulator._time, simulator._terminate = config, 0, False
        simulator._time_limit = float("inf")
        simulator._event_queue, simulator._event_trace, simulator._event_chrome_trace = [], [], []
        simulator._cluster = cluster
        simulator._metric_store = sys.modules["vidur.metrics"].MetricsStore()
        simulator._scheduler = GlobalSchedulerRegistry.get(
            cluster_config.global_scheduler_config.get_type(), config, cluster.replicas)
        requests = [Request(float(r.get("arrive", 0)), r["prompt"], r["out"]) for r in scenario["requests"]]
        ids = {request.id: str(i) for i, request in enumerate(requests)}
        steps: dict[int, dict] = {}
        watch(simulator, requests, ids, steps)
        for request in requests:
            simulator._add_event(RequestArrivalEvent(request.arrived_at, request))
        try:
            simulator.run()
        except AssertionError:
            # Simulator.run ends asserting its scheduler is empty: a request no batch can take (the
            # vllm scheduler's prompt above max_tokens_in_batch) stays queued when the events run
            # out; it is left out of the answer, as unfinished
            if simulator._event_queue:
                raise
    return requests, steps


def watch(simulator, requests, ids, steps) -> None:
    """The schedule log's steps, from the replica's on_schedule (wrapped, not
    changed): the batch it formed at time t (step t + 1) and the requests it
    restarted (preempted) while forming it."""
    scheduler = simulator._scheduler
    replica = scheduler.get_replica_scheduler(next(iter(scheduler._replica_schedulers)))
    form = replica.on_schedule

    def on_schedule():
        restarts = {request.id: request.num_restarts for request in requests}
        batches = form()
        record = steps.setdefault(step(simulator._time) + 1, {"scheduled": [], "preempted": []})
        for batch in batches:
            for request, tokens in zip(batch.requests, batch.num_tokens):
                mode = "prefill" if not request.is_prefill_complete else "decode"
                record["scheduled"].append({"request": ids[request.id], "tokens": tokens, "mode": mode})
        record["preempted"] += [ids[r.id] for r in requests if r.num_restarts > restarts[r.id]]
        return batches

    replica.on_schedule = on_schedule


def answer(scenario: dict, scheduler: str, log: str | None = None) -> dict:
    why = unsupported(scenario)
    if why is not None:
        return {"unsupported": why}
    requests, steps = simulate(scenario, scheduler)
    first, done, preemptions = {}, {}, 0
    for i, request in enumerate(requests):
        preemptions += request.num_restarts
        if not request.completed:
            continue
        first[str(i)], done[str(i)] = step(request._prefill_completed_at), step(request._completed_at)
        steps.setdefault(done[str(i)], {"scheduled": [], "preempted": []}).setdefault("finished", []).append(str(i))
    if log is not None:
        write_log(log, scheduler, steps)
    return {"first": first, "done": done, "preemptions": preemptions,
            "steps": max(done.values(), default=0) + 1}


def step(time) -> int:
    if abs(time - round(time)) > 1e-9:
        raise RuntimeError(f"a time off the unit step grid: {time}")
    return int(round(time))


def write_log(path: str, scheduler: str, steps: dict) -> None:
    header = {"format": "serq-schedule-log", "version": 1,
              "engine": f"Vidur ({scheduler} replica scheduler, constant execution time)",
              "fields": ["scheduled", "preempted", "finished"], "unordered": ["preempted"]}
    with open(path, "w", encoding="utf-8") as f:
        f.write(json.dumps(header) + "\n")
        for n in sorted(steps):
            record = steps[n]
            f.write(json.dumps({"step": n, "scheduled": record["scheduled"], "preempted": record["preempted"],
                                "finished": record.get("finished", [])}) + "\n")


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] not in SCHEDULERS:
        sys.exit("usage: python examples/adapters/vidur_adapter.py vllm|sarathi SCENARIO.json")
    try:
        with open(sys.argv[2], encoding="utf-8") as f:
            data = json.load(f)
        print(json.dumps(answer(data, sys.argv[1], os.environ.get("SERQ_SCHEDULE_LOG"))))
    except (OSError, ValueError, KeyError, RuntimeError, AssertionError) as error:
        sys.exit(f"vidur_adapter: {sys.argv[2]}: {type(error).__name__}: {error}")
