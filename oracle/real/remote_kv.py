"""The oracle's KV connector: a decode instance's side of prefill/decode
disaggregation with no network (docs/design/kv-connector.md in serq-ref).

Imported by vLLM's connector factory from the driver's process (the
driver's directory is on the path: ``kv_connector_module_path`` is
``remote_kv``); never imported by serq-ref. It says to vLLM 0.33.0's
scheduler what a pull-mode connector on the decode side says (as
vllm/distributed/kv_transfer/kv_connector/v1/nixl/pull_scheduler.py does
with ``do_remote_prefill``):

- ``get_num_new_matched_tokens(request, local)``: a request whose
  ``kv_transfer_params`` carry ``remote`` = R (the prompt tokens the prefill
  instance computed) and whose transfer has not yet been started answers
  ``(R - local, True)`` when R > local: load asynchronously; otherwise
  ``(0, False)``;
- ``update_state_after_alloc(request, blocks, n)``: the first call for a
  request starts its transfer when n > 0 and consumes its remote tokens
  either way (one transfer per request: a preempted request recomputes);
  the started transfers are kept in ``started`` for the driver, which is the
  worker: it reports each one finished (``finished_recving``) in the model
  runner output of the step the scenario gives;
- it frees nothing late and sends nothing (``request_finished``: False).

Nothing here copies vLLM's code; it implements vLLM's public connector
interface (KVConnectorBase_V1, SupportsHMA).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from vllm.distributed.kv_transfer.kv_connector.v1 import KVConnectorBase_V1
from vllm.distributed.kv_transfer.kv_connector.v1.base import KVConnectorMetadata, SupportsHMA

#: The key of a request's kv_transfer_params that holds its remote tokens.
REMOTE = "serq_remote_tokens"


class RemoteKVMetadata(KVConnectorMetadata):
    """Nothing goes to a worker: the driver is the worker."""


class RemoteKV(KVConnectorBase_V1, SupportsHMA):
    """The scheduler-side connector of a decode instance whose prompts were
    prefilled elsewhere; see the module's docstring."""

    def __init__(self, vllm_config, role, kv_cache_config):
        super().__init__(vllm_config, role, kv_cache_config)
        #: request id -> external tokens, transfers started since the driver last took them (``take_started``)
        self.started: dict[str, int] = {}
        #: request ids whose remote tokens are consumed (their first allocation happened)
        self.consumed: set[str] = set()

    # -- scheduler side --------------------------------------------------

    def get_num_new_matched_tokens(self, request, num_computed_tokens: int) -> tuple[int | None, bool]:
        params = request.kv_transfer_params or {}
        remote = int(params.get(REMOTE, 0) or 0)
        if request.request_id in self.consumed:
            return 0, False
        count = min(remote, request.num_prompt_tokens) - num_computed_tokens
        if count > 0:
            return count, True
        return 0, False

    def update_state_after_alloc(self, request, blocks, num_external_tokens: int):
        if request.request_id in self.consumed:
            return
        self.consumed.add(request.request_id)
        if num_external_tokens > 0:
            self.started[request.request_id] = int(num_external_tokens)

    def take_started(self) -> dict[str, int]:
        """The transfers started since the last call (request id -> tokens)."""
        started, self.started = self.started, {}
        return started

    def build_connector_meta(self, scheduler_output) -> KVConnectorMetadata:
        return RemoteKVMetadata()

    def request_finished(self, request, block_ids) -> tuple[bool, dict[str, Any] | None]:
        return False, None

    def request_finished_all_groups(self, request, block_ids) -> tuple[bool, dict[str, Any] | None]:
        return False, None

    # -- worker side: never called (no model runner) ---------------------

    def start_load_kv(self, forward_context, **kwargs: Any) -> None:
        raise NotImplementedError("the oracle's connector has no worker")

    def wait_for_layer_load(self, layer_name: str) -> None:
        raise NotImplementedError("the oracle's connector has no worker")

    def save_kv_layer(self, layer_name, kv_layer, attn_metadata, **kwargs: Any) -> None:
        raise NotImplementedError("the oracle's connector has no worker")

    def wait_for_save(self):
        raise NotImplementedError("the oracle's connector has no worker")


# ---------------------------------------------------------------------------
# The worker's side, played by the driver: when each transfer is reported done


#: The scenario's name of this module and class, as vLLM's factory imports them.
MODULE, CLASS = "remote_kv", "RemoteKV"


def transfer_config():
    """vLLM's KVTransferConfig of a decode instance with this connector
    (``kv_consumer``: it only receives; vLLM's own default
    ``kv_load_failure_policy``, no load fails here)."""
    from vllm.config import KVTransferConfig

    return KVTransferConfig(kv_connector=CLASS, kv_connector_module_path=MODULE, kv_role="kv_consumer")


def transfer_params(remote: int) -> dict:
    """A request's kv_transfer_params (SamplingParams.extra_args) with ``remote`` remote tokens."""
    return {"kv_transfer_params": {REMOTE: int(remote)}}


def with_remote_kv(cls: type, delays: dict[str, int]) -> type:
    """``cls`` whose model runner output reports the transfers done, as a
    worker-side connector's ``get_finished`` does through the output's
    ``kv_connector_output.finished_recving`` (the engine core hands it to
    update_from_output, scheduler.py:2581-2582). Each schedule() call is a
    step, numbered from 1 (``calls``); a transfer started by step s's
    schedule() (the connector's update_state_after_alloc) is done in the
    output of step s + delays[id]; ``due`` holds the transfers not yet
    reported (request id -> step)."""
    from vllm.v1.outputs import KVConnectorOutput

    def schedule(self, *args, **kwargs):
        output = cls.schedule(self, *args, **kwargs)
        self.calls = getattr(self, "calls", 0) + 1
        self.__dict__.setdefault("due", {})
        self.__dict__.setdefault("batch_of", {})[id(output)] = self.calls
        for rid in self.connector.take_started():
            self.due[rid] = self.calls + int(delays.get(rid, 0))
            self.__dict__.setdefault("transfers", {})[rid] = [self.calls, None]
        return output

    def update_from_output(self, scheduler_output, model_runner_output):
        step = self.batch_of.pop(id(scheduler_output))
        done = {rid for rid, at in self.due.items() if at <= step}
        self.reported = bool(done)
        for rid in done:
            del self.due[rid]
            self.transfers[rid][1] = step
        if done:
            model_runner_output = dataclasses.replace(
                model_runner_output, kv_connector_output=KVConnectorOutput(finished_recving=done))
        return cls.update_from_output(self, scheduler_output, model_runner_output)

    return type("RemoteKV" + cls.__name__, (cls,), {"schedule": schedule, "update_from_output": update_from_output})


def outstanding(scheduler) -> bool:
    """Some transfer was started and is not yet reported done, or the last
    output applied reported one (its request is promoted at the next
    schedule()): the scenario is not stalled."""
    return bool(getattr(scheduler, "due", None)) or bool(getattr(scheduler, "reported", False))
