"""Independent cases run on worker processes of this machine or on a Ray
cluster, their results handed back in case order (docs/sweep.md, "Workers and
Ray").

``run_cases(task, cases, workers=N, ray=ADDRESS)`` calls ``task(case)`` for
every case and yields the results in the cases' order, whatever the number of
workers and whichever finished first, so a command that prints them prints
the same bytes with 1 worker, 2, or a cluster. ``task`` must be a function of
a module (picklable by reference) and deterministic.

- ``workers`` 1 and no ``ray``: in this process, one case after another.
- ``workers`` N > 1: N processes of this machine (forked: they share the
  modules already loaded).
- ``ray`` ADDRESS (``auto``: the cluster ``ray start`` made on this machine):
  tasks on a Ray cluster (the optional extra ``ray``). Its workers import
  this tree (PYTHONPATH is set to it in the job's runtime environment); on a
  cluster of several machines every node needs the same serq-ref installed.

Cases go out in batches of consecutive cases (``batch_size``), so that a case
of a few milliseconds is not dominated by the cost of sending it. A worker
that dies (killed, out of memory, a node lost) is named on standard error with
the cases it held; they are sent again, to a new worker, up to
``MAX_RETRIES`` times, and then the command stops naming them: no case is
dropped. An exception a case raises is raised again here when its turn in
the case order comes, as if it had run in this process.

A ``Journal`` records each case's result as it comes back; a run started again
with the same journal takes the recorded results and runs only the others
(``--resume FILE`` on the commands that have it).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import pickle
import sys
from collections import deque
from typing import Any, Callable, Iterator, Sequence

from .arguments import positive
from .errors import SerqError, UsageError

#: Batches per worker the cases are cut into (at least): enough that a slow
#: batch near the end leaves the others little to wait for.
BATCHES_PER_WORKER = 8
#: The most cases in one batch.
MAX_BATCH = 64
#: How often a batch whose worker died is sent again before the run stops.
MAX_RETRIES = 2


def add_arguments(p) -> None:
    """``--workers N``, ``--ray ADDRESS|auto`` and ``--resume FILE``: a command over independent cases."""
    p.add_argument("--workers", type=positive, default=1, metavar="N",
                   help="run the cases on N processes of this machine (the output is the same bytes whatever N). "
                        "Default: 1, in this process")
    p.add_argument("--ray", metavar="ADDRESS|auto",
                   help="run the cases on a Ray cluster (auto: the one `ray start --head` made here; the optional "
                        "extra ray). Default: this machine")
    p.add_argument("--resume", metavar="FILE",
                   help="record each case's result in FILE as it comes; cases FILE already records (a run "
                        "stopped early, of the same inputs) are not run again. Default: nothing recorded")


class WorkerLost(SerqError):
    """A batch of cases whose worker died more than MAX_RETRIES times."""

    exit_code = 1


def batch_size(total: int, workers: int) -> int:
    """Cases per batch: the cases cut into at least BATCHES_PER_WORKER batches
    per worker, at most MAX_BATCH cases each, at least 1."""
    return max(1, min(MAX_BATCH, math.ceil(total / (max(1, workers) * BATCHES_PER_WORKER))))


def describe(start: int, count: int, labels: Sequence[str] | None) -> str:
    """``cases 10-17`` (0-based indices), or the first and last labels when the cases have them."""
    if labels is not None:
        first, last = labels[start], labels[start + count - 1]
        return first if count == 1 else f"{first} .. {last} ({count} cases)"
    return f"case {start}" if count == 1 else f"cases {start}-{start + count - 1}"


def run_batch(task: Callable[[Any], Any], cases: Sequence[Any], cwd: str | None = None) -> list[tuple[str, Any]]:
    """A batch in a worker: ``("ok", result)`` or ``("error", exception)`` per case; ``cwd``: the
    driver's working directory, which relative paths in the cases are read from (a Ray worker's is its own)."""
    if cwd is not None and os.getcwd() != cwd:
        os.chdir(cwd)
    out: list[tuple[str, Any]] = []
    for case in cases:
        try:
            out.append(("ok", task(case)))
        except Exception as e:  # raised again in the driver, in case order
            out.append(("error", pack_error(e)))
    return out


def pack_error(e: Exception) -> tuple:
    """An exception as (class, args, attributes), which pickles whatever its
    constructor takes (a SerqError keeps its span and notes)."""
    packed = (type(e), e.args, dict(e.__dict__))
    try:
        pickle.dumps(packed)
    except Exception:
        return (RuntimeError, (f"{type(e).__name__}: {e}",), {})
    return packed


def unpack_error(packed: tuple) -> Exception:
    cls, args, attributes = packed
    e = cls.__new__(cls)
    Exception.__init__(e, *args)
    e.__dict__.update(attributes)
    return e


def run_cases(task: Callable[[Any], Any], cases: Sequence[Any], *, workers: int = 1, ray: str | None = None,
              progress=None, journal: "Journal | None" = None, labels: Sequence[str] | None = None,
              note: Callable[[str], None] | None = None) -> Iterator[Any]:
    """``task(case)`` for every case, the results yielded in case order.

    ``progress``: a ``semantics.progress.CaseProgress`` advanced as cases come
    back; ``journal``: results recorded, and recorded ones not run again;
    ``labels``: the cases' names in messages; ``note``: where a dead worker is
    reported (default: standard error, or above the progress bar)."""
    if note is None:
        note = progress.write if progress is not None else (lambda line: print(line, file=sys.stderr, flush=True))
    if ray is not None:
        connect_ray(ray)  # a missing Ray or an address nobody answers: a usage error now, before any case
    return _results(task, cases, workers, ray, progress, journal, labels, note)


def _results(task, cases, workers, ray, progress, journal, labels, note) -> Iterator[Any]:
    done: dict[int, Any] = dict(journal.results) if journal is not None else {}
    todo = [i for i in range(len(cases)) if i not in done]
    if progress is not None and done:
        progress.advance(len(done))
    if not todo:
        source: Iterator[tuple[int, list]] = iter(())
    elif ray is not None:
        source = _on_ray(task, cases, todo, ray, workers, labels, note)
    elif workers > 1 and len(todo) > 1:
        source = _on_processes(task, cases, todo, workers, labels, note)
    else:
        source = ((i, run_batch(task, [cases[i]])) for i in todo)
    nxt = 0
    try:
        while nxt < len(cases):
            if nxt in done:
                value = done.pop(nxt)
                if isinstance(value, _Failed):
                    raise value.error
                yield value
                nxt += 1
                continue
            start, outs = next(source)
            for offset, (kind, value) in enumerate(outs):
                index = start + offset
                done[index] = value if kind == "ok" else _Failed(unpack_error(value))
                if journal is not None and kind == "ok":
                    journal.record(index, value)
            if journal is not None:
                journal.flush()
            if progress is not None:
                progress.advance(len(outs))
    finally:
        close = getattr(source, "close", None)
        if close is not None:
            close()


class _Failed:
    def __init__(self, error: BaseException):
        self.error = error


def _batches(todo: list[int], workers: int) -> deque[tuple[int, int]]:
    """(start, count) runs of consecutive indices of ``todo``, each at most batch_size."""
    size = batch_size(len(todo), workers)
    out: deque[tuple[int, int]] = deque()
    for i in todo:
        if out and out[-1][0] + out[-1][1] == i and out[-1][1] < size:
            out[-1] = (out[-1][0], out[-1][1] + 1)
        else:
            out.append((i, 1))
    return out


# --------------------------------------------------------------------------
# processes of this machine
# --------------------------------------------------------------------------


def _process_main(conn, task) -> None:
    while True:
        try:
            message = conn.recv()
        except EOFError:
            return
        if message is None:
            return
        start, cases = message
        conn.send((start, run_batch(task, cases)))


def _on_processes(task, cases, todo, workers, labels, note) -> Iterator[tuple[int, list]]:
    import multiprocessing
    from multiprocessing.connection import wait

    context = multiprocessing.get_context("fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn")
    pending = _batches(todo, workers)
    retries: dict[int, int] = {}
    slots: list[list] = []  # [process, connection, batch or None, number]
    started = 0

    def start_worker() -> list:
        nonlocal started
        started += 1
        mine, theirs = context.Pipe()
        process = context.Process(target=_process_main, args=(theirs, task), daemon=True,
                                  name=f"serq-ref worker {started}")
        process.start()
        theirs.close()
        return [process, mine, None, started]

    try:
        for _ in range(min(workers, len(pending))):
            slots.append(start_worker())
        while pending or any(slot[2] is not None for slot in slots):
            for slot in slots:
                if slot[2] is None and pending:
                    start, count = pending.popleft()
                    slot[2] = (start, count)
                    slot[1].send((start, [cases[i] for i in range(start, start + count)]))
            busy = [slot for slot in slots if slot[2] is not None]
            ready = wait([slot[1] for slot in busy] + [slot[0].sentinel for slot in busy])
            for k, slot in enumerate(slots):
                if slot[2] is None:
                    continue
                process, connection, batch, number = slot
                if connection in ready:
                    try:
                        start, outs = connection.recv()
                    except (EOFError, OSError):
                        pass  # it died: below
                    else:
                        slot[2] = None
                        yield start, outs
                        continue
                if process.sentinel in ready or not process.is_alive():
                    process.join()
                    code = process.exitcode
                    how = f"killed by signal {-code}" if code is not None and code < 0 else f"exit status {code}"
                    start, count = batch
                    retries[start] = retries.get(start, 0) + 1
                    what = describe(start, count, labels)
                    if retries[start] > MAX_RETRIES:
                        raise WorkerLost(f"worker {number} (pid {process.pid}) died ({how}) running {what}, the "
                                         f"{retries[start]}th worker to die on them; stopped (nothing was dropped: "
                                         f"those cases have no result)")
                    note(f"serq-ref: worker {number} (pid {process.pid}) died ({how}) running {what}; "
                         f"sent again to a new worker (try {retries[start] + 1} of {MAX_RETRIES + 1})")
                    connection.close()
                    pending.appendleft(batch)
                    slots[k] = start_worker()
    finally:
        for process, connection, _, _ in slots:
            try:
                connection.send(None)
            except (OSError, ValueError):
                pass
            connection.close()
        for process, _, _, _ in slots:
            process.join(timeout=5)
            if process.is_alive():
                process.terminate()
                process.join()


# --------------------------------------------------------------------------
# a Ray cluster
# --------------------------------------------------------------------------


def project_root() -> str:
    """The directory the packages of this tree (semantics, oracle, ...) are in."""
    return os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def connect_ray(address: str):
    """``ray.init`` on the cluster at ``address`` (``auto``: the one ``ray
    start`` made here), its workers importing this tree; a clear usage error
    when Ray is not installed or no cluster answers."""
    try:
        import ray
    except ImportError:
        raise UsageError("--ray needs Ray, an optional extra: python3 -m pip install -e '.[ray]'") from None
    if ray.is_initialized():
        return ray
    check_reachable(address)
    loopback = is_loopback(resolve_auto(address))
    if loopback:
        # Ray 2.60 turns a loopback address into the machine's interface address (ray/_private/services.py,
        # resolve_ip_for_localhost and get_node_ip_address), so a driver given 127.0.0.1:PORT looks for the
        # head on eth0's address, where a head started on loopback does not listen, and waits minutes. Its
        # switch for a cluster of this machine alone (ray_constants.ENABLE_RAY_CLUSTER, read from the variable
        # RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER when Ray is imported) keeps every address on loopback; the head
        # is started with the variable set to 0 (docs/sweep.md), the driver sets the switch here.
        try:
            from ray._private import ray_constants

            ray_constants.ENABLE_RAY_CLUSTER = False
        except (ImportError, AttributeError):
            pass
    root = project_root()
    path = os.pathsep.join([root] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p])
    env_vars = {"PYTHONPATH": path}
    pinned = {"_node_ip_address": LOOPBACK} if loopback else {}
    if loopback:
        env_vars[RAY_LOCAL_ONLY] = "0"
    try:
        ray.init(address=address, runtime_env={"env_vars": env_vars}, logging_level="ERROR",
                 log_to_driver=False, configure_logging=True, **pinned)
    except (ConnectionError, RuntimeError, ValueError) as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise UsageError(f"--ray {address}: no Ray cluster answered ({first}); start one with `ray start --head` "
                         "(then --ray auto) or give the head's address") from None
    # Ray prints a dead worker's error on the driver's standard output (ray/_private/worker.py,
    # listen_error_messages: print_to_stdstream with is_err False), which is the command's output here;
    # run_cases names the dead worker on standard error itself. Ray's switch for it is a module global.
    try:
        import ray._private.worker as ray_worker

        ray_worker._worker_logs_enabled = False
    except (ImportError, AttributeError):
        pass
    return ray


#: the loopback address a local cluster is pinned to, and Ray's variable that keeps a cluster on it
LOOPBACK = "127.0.0.1"
RAY_LOCAL_ONLY = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"


def resolve_auto(address: str) -> str:
    """``auto``: the address of the head `ray start` made here, as Ray finds it (its latest cluster's file);
    any other address as it is, and ``auto`` too when Ray finds none (ray.init then says so)."""
    if address != "auto":
        return address
    try:
        from ray._private.services import get_ray_address_from_environment

        return get_ray_address_from_environment("auto", None) or address
    except Exception:  # noqa: BLE001 - Ray's own lookup; ray.init reports what is wrong
        return address


def is_loopback(address: str) -> bool:
    """Whether ``address`` (HOST:PORT) is a head on this machine's loopback."""
    host = address.split("://", 1)[-1].rpartition(":")[0].strip("[]")
    return host in ("localhost", "::1") or host.startswith("127.")


def check_reachable(address: str, timeout: float = 5.0) -> None:
    """A HOST:PORT that no server answers is a usage error at once (ray.init would wait minutes for it)."""
    import socket

    if address == "auto" or "://" in address:
        return
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit():
        raise UsageError(f"--ray {address}: an address is HOST:PORT (the head's, as `ray start --head` printed it), "
                         "or auto")
    try:
        socket.create_connection((host, int(port)), timeout=timeout).close()
    except OSError as e:
        raise UsageError(f"--ray {address}: no Ray cluster answered ({e.strerror or e}); start one with "
                         "`ray start --head` (then --ray auto) or give the head's address") from None


def _on_ray(task, cases, todo, address, workers, labels, note) -> Iterator[tuple[int, list]]:
    ray = connect_ray(address)
    from ray import exceptions

    remote = ray.remote(max_retries=0)(run_batch)
    cpus = max(1, int(ray.cluster_resources().get("CPU", 1)))
    pending = _batches(todo, max(cpus, workers))
    task_ref = ray.put(task)
    cwd = os.getcwd()
    running: dict[Any, tuple[int, int]] = {}
    retries: dict[int, int] = {}

    def submit(batch: tuple[int, int]) -> None:
        start, count = batch
        running[remote.remote(task_ref, [cases[i] for i in range(start, start + count)], cwd)] = batch

    try:
        for batch in pending:
            submit(batch)
        while running:
            ready, _ = ray.wait(list(running), num_returns=1)
            ref = ready[0]
            batch = running.pop(ref)
            try:
                outs = ray.get(ref)
            except exceptions.RayTaskError as e:  # the batch itself failed outside a case: a bug of ours
                raise RuntimeError(f"a Ray task failed running {describe(*batch, labels)}: {e}") from None
            except exceptions.RayError as e:
                start, count = batch
                retries[start] = retries.get(start, 0) + 1
                said = str(e).strip().splitlines()[0] if str(e).strip() else ""
                what = describe(start, count, labels)
                if retries[start] > MAX_RETRIES:
                    raise WorkerLost(f"a Ray worker died running {what} ({type(e).__name__}: {said}), the "
                                     f"{retries[start]}th to die on them; stopped (those cases have no result)")
                note(f"serq-ref: a Ray worker died running {what} ({type(e).__name__}: {said}); sent again "
                     f"(try {retries[start] + 1} of {MAX_RETRIES + 1})")
                submit(batch)
                continue
            yield batch[0], outs
    finally:
        for ref in running:
            ray.cancel(ref, force=True)
        ray.shutdown()


# --------------------------------------------------------------------------
# the journal: results recorded as they come, a run resumed from them
# --------------------------------------------------------------------------


def fingerprint(*parts: Any) -> str:
    """A key of the run's inputs (JSON of ``parts``): a journal of other inputs is refused."""
    text = json.dumps(parts, sort_keys=True, default=repr)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]


class Journal:
    """``FILE``: a header line ``{"serq_ref_journal": 1, "key": KEY}``, then one
    line ``{"case": I, "result": R}`` per case done. ``encode`` makes a result
    JSON, ``decode`` makes it back the same value. A last line cut short (the
    run killed while writing it) is ignored; a file with another key is
    refused (a usage error)."""

    VERSION = 1

    def __init__(self, path: str, key: str, total: int, encode: Callable[[Any], Any] = lambda r: r,
                 decode: Callable[[Any], Any] = lambda j: j):
        self.path, self.key, self.encode = path, key, encode
        self.results: dict[int, Any] = {}
        lines: list[str] = []
        try:
            with open(path, encoding="utf-8") as f:
                lines = f.read().split("\n")
        except FileNotFoundError:
            pass
        except (OSError, UnicodeDecodeError) as e:
            raise UsageError(f"--resume {path}: cannot read it: {e}") from None
        lines = [line for line in lines if line.strip()]
        kept = lines[:1]
        if lines:
            try:
                header = json.loads(lines[0])
            except json.JSONDecodeError:
                header = None
            if not isinstance(header, dict) or header.get("serq_ref_journal") != self.VERSION:
                raise UsageError(f"--resume {path}: not a serq-ref journal (its first line is no journal header)")
            if header.get("key") != key:
                raise UsageError(f"--resume {path}: it records another run (other program, settings or cases); "
                                 "give a new file, or remove it to start again")
            for number, line in enumerate(lines[1:], 2):
                try:
                    record = json.loads(line)
                    index = record["case"]
                    result = decode(record["result"])
                except (json.JSONDecodeError, KeyError, TypeError, ValueError):
                    if number == len(lines):
                        break  # cut short by a killed run: dropped below
                    raise UsageError(f"--resume {path}: line {number} is not a recorded case") from None
                if not (isinstance(index, int) and 0 <= index < total):
                    raise UsageError(f"--resume {path}: line {number} records case {index!r}, and this run has "
                                     f"cases 0-{total - 1}")
                self.results[index] = result
                kept.append(line)
        try:
            if len(kept) != len(lines) or not lines:  # new, or a last line cut short: written anew
                with open(path, "w", encoding="utf-8") as f:
                    f.write("".join(line + "\n" for line in kept) if kept else
                            json.dumps({"serq_ref_journal": self.VERSION, "key": key}) + "\n")
            self.file = open(path, "a", encoding="utf-8")
        except OSError as e:
            raise UsageError(f"--resume {path}: cannot write it: {e.strerror}") from None

    def record(self, index: int, result: Any) -> None:
        self.file.write(json.dumps({"case": index, "result": self.encode(result)}) + "\n")

    def flush(self) -> None:
        self.file.flush()

    def close(self) -> None:
        self.file.close()
