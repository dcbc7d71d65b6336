"""CPU offloading: vLLM 0.33.0's own OffloadingConnector on the scheduler's
side, the driver playing its worker (docs/design/cpu-offloading.md in
serq-ref).

Imported by the driver (oracle/real/driver.py) in vLLM's environment; never
imported by serq-ref. Nothing here is a connector of the oracle's own: the
scheduler is built with ``CacheConfig.kv_offloading_size`` (backend
"native"), from which vLLM itself picks ``OffloadingConnector``
(vllm/config/vllm.py:1150-1185) with its CPU manager and its LRU policy
(vllm/v1/kv_offload/cpu/manager.py, cpu/policies/lru.py). The size is the
scenario's ``cpu_blocks`` chunks of the CPU tier, converted to the GiB vLLM
reads (CPUOffloadingSpec divides the bytes by one chunk's bytes rounded up to
a page, vllm/v1/kv_offload/cpu/spec.py:105-131); the driver checks that vLLM
made exactly that many.

The worker (vllm/distributed/kv_transfer/kv_connector/v1/offloading/
worker.py) is played by ``with_offload``: each schedule() is a step,
numbered from 1; the connector's metadata of step s (its load jobs, store
jobs and jobs to flush) is read off the scheduler output, and

- an asynchronous load job started at step s is reported done at step s +
  ``load_delay``: its job id in ``kv_connector_worker_meta.completed_jobs``
  and its request in ``finished_recving`` (worker.py:286-321);
- a store job made at step s is submitted by the worker at the start of step
  s + 1 (worker.py:272-284, 246-251) and reported done at step s +
  ``store_delay`` (``store_delay`` >= 1);
- a job to flush (a pending store whose blocks are reallocated, or whose
  request is preempted) is waited for before step s's forward pass
  (worker.py:219-244): reported done at step s if not before.

One worker (world size 1): each job's count reaches num_workers with one
report.

Nothing here copies vLLM's code; it calls vLLM's public classes.
"""

from __future__ import annotations

import dataclasses
import mmap

#: The scenario's ``offload`` fields and their defaults.
DEFAULTS = {"load_delay": 0, "store_delay": 1}


def offloading_size_gib(cpu_blocks: int, block_size: int, page_size_bytes: int) -> float:
    """``CacheConfig.kv_offloading_size`` (GiB) for a CPU tier of
    ``cpu_blocks`` chunks of one block each: a chunk's bytes are one GPU
    block's (``page_size_bytes``, one layer, one worker) rounded up to the
    page (CPUOffloadingSpec.BLOCK_SIZE_ALIGNMENT = mmap.PAGESIZE,
    vllm/v1/kv_offload/cpu/shared_offload_region.py:105), and vLLM takes
    ``int(size * 2**30) // aligned`` chunks (config/vllm.py:1172-1174,
    cpu/spec.py:111-126). The size is exact in binary floating point (a
    multiple of a page over 2**30)."""
    aligned = -(-page_size_bytes // mmap.PAGESIZE) * mmap.PAGESIZE
    return cpu_blocks * aligned / float(1 << 30)


def cpu_chunks(scheduler) -> int:
    """The CPU tier's chunks as vLLM built it."""
    return int(scheduler.connector.connector_scheduler.manager._num_chunks)


def with_offload(cls: type, load_delay: int, store_delay: int) -> type:
    """``cls`` whose model runner output reports the offloading connector's
    transfer jobs done as its worker would (the module's docstring).
    Attributes: ``calls`` the step of the last schedule() (the driver's
    ``clock``); ``due`` job id -> step it is
    reported done; ``reported`` whether the last output applied reported a
    job (a load's request is promoted at the next schedule(), a store's
    chunks are ready for the next lookup: the scenario is not stalled),
    but for a load of nothing after a load (``empty_loads``: the request
    would load nothing again at every step, and the run is stalled); ``loads`` request
    id -> [[step started, step reported, tokens loaded], ...]; ``stored``
    the chunks written to the tier, ``evicted`` the chunks the tier's policy
    dropped to make room (counted at the manager, prepare_store)."""
    from vllm.distributed.kv_transfer.kv_connector.v1.offloading.common import OffloadingWorkerMetadata
    from vllm.v1.outputs import KVConnectorOutput

    def schedule(self, *args, **kwargs):
        if not hasattr(self, "loads"):
            _observe_manager(self)
        output = cls.schedule(self, *args, **kwargs)
        # the driver's step clock (``clock``, set before each schedule()); an
        # idle gap it skips never holds a job in flight (has_requests() is
        # true while the connector has jobs, scheduler.py:3167-3182)
        self.calls = int(getattr(self, "clock", getattr(self, "calls", 0) + 1))
        self.batch_of[id(output)] = self.calls
        meta = output.kv_connector_metadata
        jobs = self.connector.connector_scheduler._jobs
        for job_id, job in meta.load_jobs.items():
            assert not job.sync, "sync loads need sync_load_budget_bytes, which the driver never sets"
            self.due[job_id] = self.calls + load_delay
            self.load_of[job_id] = job.req_id
            tokens = len(jobs[job_id].keys) * self.scheduler_config_block_size
            loads = self.loads.setdefault(job.req_id, [])
            if tokens == 0 and loads:
                # a load of nothing after a load: the request will be promoted
                # to where it was and load nothing again (a one-token prompt
                # whose token the tier holds: promoted to num_tokens - 1 = 0
                # computed, it is looked up again as a new request). Its
                # report is no progress (``reported``), so that the driver
                # ends the run as stalled rather than at the step limit.
                self.empty_loads.add(job_id)
            loads.append([self.calls, None, tokens])
        for job_id in meta.store_jobs:
            self.due[job_id] = self.calls + store_delay
        for job_id in meta.jobs_to_flush or ():
            if job_id in self.due:
                self.due[job_id] = min(self.due[job_id], self.calls)
        return output

    def update_from_output(self, scheduler_output, model_runner_output):
        step = self.batch_of.pop(id(scheduler_output))
        done = sorted(job for job, at in self.due.items() if at <= step)
        recving = set()
        for job in done:
            del self.due[job]
            rid = self.load_of.pop(job, None)
            if rid is not None:
                recving.add(rid)
                for load in self.loads[rid]:
                    if load[1] is None:
                        load[1] = step
        self.reported = any(job not in self.empty_loads for job in done)
        if done:
            model_runner_output = dataclasses.replace(
                model_runner_output,
                kv_connector_output=KVConnectorOutput(
                    finished_recving=recving or None,
                    kv_connector_worker_meta=OffloadingWorkerMetadata(completed_jobs={j: 1 for j in done})))
        return cls.update_from_output(self, scheduler_output, model_runner_output)

    return type("Offload" + cls.__name__, (cls,), {"schedule": schedule, "update_from_output": update_from_output})


def _observe_manager(scheduler) -> None:
    """The counters ``with_offload`` keeps, and the CPU manager's
    prepare_store watched for the chunks it stores and evicts."""
    scheduler.batch_of = {}
    scheduler.due = {}
    scheduler.load_of = {}
    scheduler.loads = {}
    scheduler.reported = False
    scheduler.empty_loads = set()
    scheduler.stored = 0
    scheduler.evicted = 0
    scheduler.scheduler_config_block_size = scheduler.block_size
    manager = scheduler.connector.connector_scheduler.manager
    prepare_store = manager.prepare_store

    def watched(keys, req_context):
        result = prepare_store(keys, req_context)
        if result is not None:
            scheduler.stored += len(result.keys_to_store)
            scheduler.evicted += len(result.evicted_keys)
        return result

    manager.prepare_store = watched


def answer(scheduler) -> dict:
    """The answer's ``offload``: the CPU tier's chunks as vLLM built it,
    each request's loads, the chunks stored and evicted."""
    loads = getattr(scheduler, "loads", {})
    return {
        "cpu_blocks": cpu_chunks(scheduler),
        "loads": {rid: loads[rid] for rid in sorted(loads, key=int)},
        "stored": int(getattr(scheduler, "stored", 0)),
        "evicted": int(getattr(scheduler, "evicted", 0)),
    }
