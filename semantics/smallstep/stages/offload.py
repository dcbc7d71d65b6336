"""The CPU tier of a step stage with ``offload to (N) load after (L) store after (S)``
(docs/design/cpu-offloading.md, section 6; a serq-ref extension of IR v13).

The tier is a second content index beside the memory's table of blocks
(docs/design/shared-prefixes.md): N chunks of one block each, keyed by the
blocks' identities (blocks.identity: the same key as the memory's table),
written through as prompt blocks are computed, read at a head's admission
past the memory's hit. Its state is the stage's (``StepState.tier``, a
``Tier``): the chunks (each with its LRU rank, whether it is written, and how
many loads read it), the transfer jobs in flight, and per session what vLLM
0.33.0's OffloadingConnector keeps per request (its content, its prompt, the
next chunk it offers, its LRU rank, the keys it has used).

Rules (each one named, registered and traced; premises first, conclusion last):

- ``offload/land``: an iteration starts: the jobs reported done by the
  iterations before it land: a store's chunks become readable and evictable,
  a load's chunks are read no more;
- ``offload/lookup``: the head of a queue the stage serves is looked up in the
  tier past its memory hit, chunk by chunk until the first miss;
  ``offload/wait``: a chunk found is still being written or loaded, or the
  session has a transfer in flight: the head is passed over for this
  iteration (the iteration goes on with the next waiting hold);
- ``offload/park``: a head that found chunks is admitted as a load
  (pool/admit, step/load: the KV connector's park and promotion, step/promote,
  with the delay L): the chunks it reads are pinned, its load job made;
- ``offload/store``: an iteration is formed (or dropped): each session it gave
  tokens offers its prompt's chunks complete after them, from the next it has
  not offered; those the tier lacks are written (evicting the least recent
  evictable chunks, never the offered ones; if too few, the offer is dropped
  and made again at its next tokens), a store job of S iterations;
- ``offload/flush``: a store job of a session preempted, or of a finished
  session whose block an admission of this iteration took, lands with this
  iteration's output;
- ``offload/finish``: a session whose hold on the memory ended (not
  preempted) offers its prompt's chunks once more and its chunks become the
  most recent, its head the last evicted.

Ties: chunks are evicted by the declared key (rank, key order), ranks being
numbers the tier hands out in sequence (vLLM's LRUCachePolicy: a request's
rank then its chunk's position, tails first; a finished request's chunks new
ranks, tail first); jobs by their sequence number; sessions in the order the
iteration gave them tokens (vLLM's num_scheduled_tokens), then the finished
ones by serial.
"""

from __future__ import annotations

from typing import NamedTuple

import immutables

from ..blocks import identity
from ..configuration import Configuration, innermost_hold, records, replace_at
from ..machine import EPSILON, Machine
from ..rules import rule


class Chunk(NamedTuple):
    """A chunk of the tier: its LRU rank (lowest evicted first), whether its store landed (readable,
    evictable), and how many loads in flight read it (pinned while above 0)."""

    rank: tuple[int, int]
    ready: bool
    pins: int


class Job(NamedTuple):
    """A transfer in flight: its sequence number, its session, a load or a store, its chunks' keys, the first
    iteration (its number) whose forming sees it reported (offload/land), and for a store the memory's blocks
    it copies (offload/flush)."""

    number: int
    serial: int
    load: bool
    keys: tuple
    due: int
    blocks: tuple = ()


class Request(NamedTuple):
    """What the tier keeps of a session (vLLM 0.33.0's RequestOffloadState and its cache access): its hold's
    content, its prompt (the memory units its first admission reserved: offload_prompt_only), the next chunk it
    offers, its LRU rank (None until it first uses a chunk), the keys it used in the order it used them, its
    hold id on the memory, and whether its finish is processed."""

    content: tuple
    prompt: float
    stored: int
    rank: int | None
    seen: tuple
    hold: int | None
    blocks: tuple = ()  # the memory's blocks of its hold, as its last iteration left them (a finished one's stores)


class Tier(NamedTuple):
    chunks: immutables.Map  # key -> Chunk
    jobs: tuple  # Job, in sequence
    requests: immutables.Map  # serial -> Request
    next_rank: int
    next_job: int
    stored: int = 0  # chunks written (the answer's figure)
    evicted: int = 0  # chunks the tier dropped to make room
    #: the end of the last iteration formed while a transfer was in flight (the engine's last step: vLLM steps
    #: while the connector has jobs, has_pending_push_work)
    until: float = 0.0
    size: int = 0  # N, its chunks
    #: the sessions whose first admission loaded their whole prompt (vLLM reports the whole prompt cached,
    #: num_cached_tokens, scheduler.py:1251-1258, where the hold's cached is the prompt less its last token)
    whole: tuple = ()


records(Chunk, Job, Request, Tier)

EMPTY = Tier(immutables.Map(), (), immutables.Map(), 0, 0)


class Found(NamedTuple):
    """The premise of offload/lookup: the head's memory hit (blocks), the chunks found past it, whether it must
    wait (a chunk found not readable or being loaded, or a transfer of its own in flight)."""

    local: int
    chunks: int
    wait: bool
    why: str


def _tier(c: Configuration, s: int) -> Tier:
    return c.stages[s].tier


def _with_tier(c: Configuration, s: int, tier: Tier) -> Configuration:
    return c._replace(stages=replace_at(c.stages, s, c.stages[s]._replace(tier=tier)))


def busy(m: Machine, c: Configuration, s: int) -> bool:
    """Whether the tier keeps the engine stepping: a job in flight, or a finished session to process (vLLM's
    has_pending_push_work and its finished_req_ids, scheduler.py:3167-3182)."""
    tier = _tier(c, s)
    return tier is not None and (bool(tier.jobs) or bool(finished_sessions(m, c, s)))


def _holds_memory(session, p: int) -> bool:
    return session is not None and innermost_hold(session, p)[0] >= 0


def _queued_for(session, p: int) -> bool:
    return session is not None and session.pending is not None and p in session.pending.pools


def finished_sessions(m: Machine, c: Configuration, s: int) -> tuple[int, ...]:
    """The sessions the tier knows whose hold on the memory ended and that wait for none again: finished
    (vLLM's finished_req_ids), by serial."""
    tier = _tier(c, s)
    p = m.steps[s].memory
    out = []
    for serial in sorted(tier.requests.keys()):
        session = c.sessions.get(serial)
        if not _holds_memory(session, p) and not _queued_for(session, p):
            out.append(serial)
    return tuple(out)


# -- landing ---------------------------------------------------------------------------------------------------


def landing(m: Machine, c: Configuration, s: int) -> tuple:
    """The premise of offload/land: the jobs reported by the iterations before the one forming (due <= its number)."""
    tier = _tier(c, s)
    if tier is None or not tier.jobs:
        return ()
    number = c.stages[s].iteration.number
    return tuple(j for j in tier.jobs if j.due <= number)


@rule("offload/land", "an iteration starts on a stage with a CPU tier: every job reported by the iterations before it lands, in sequence: a store's chunks still in the tier become readable and evictable, a load's chunks are read by one load fewer",
      "serq-ref extension (docs/design/cpu-offloading.md): vLLM 0.33.0 update_connector_output reads completed_jobs (offloading/scheduler.py:2218-2290), complete_store marks a chunk ready and evictable (kv_offload/cpu/manager.py:375-420), complete_load unpins it (manager.py:244-258); the output of step s is applied before step s + 1 is scheduled (s + 2 under asynchronous scheduling)")
def land(m: Machine, c: Configuration, s: int, jobs: tuple) -> Configuration:
    tier = _tier(c, s)
    chunks = tier.chunks
    for job in jobs:
        for key in job.keys:
            chunk = chunks.get(key)
            if chunk is None:
                continue
            if job.load:
                chunks = chunks.set(key, chunk._replace(pins=chunk.pins - 1))
            elif not chunk.ready:
                chunks = chunks.set(key, chunk._replace(ready=True))
    done = {j.number for j in jobs}
    tier = tier._replace(chunks=chunks, jobs=tuple(j for j in tier.jobs if j.number not in done))
    c = _with_tier(c, s, tier)
    if m.observer:
        m.notify("offload/land", c, {"stage": m.stage_name(s), "iteration": c.stages[s].iteration.number,
                                     "stores": sum(1 for j in jobs if not j.load),
                                     "loads": sum(1 for j in jobs if j.load)})
    return c


# -- lookup ------------------------------------------------------------------------------------------------------


def _request_for(m: Machine, c: Configuration, s: int, a) -> Request:
    """The head's Request: the tier's, or a new one (its first admission: its prompt the memory units it
    reserves now)."""
    tier = _tier(c, s)
    p = m.steps[s].memory
    serial = a.waiting.serial
    pools = c.sessions[serial].pending.pools
    known = tier.requests.get(serial)
    if known is not None:
        return known
    return Request(a.content, a.needs[pools.index(p)], 0, None, (), None)


def find(m: Machine, c: Configuration, s: int, a, local: int) -> Found:
    """The premise of offload/lookup and offload/wait for head ``a`` whose memory hit is ``local`` blocks: the
    chunks of its known tokens' full blocks from block ``local`` on that the tier has, until the first miss
    (vLLM 0.33.0 _maximal_prefix_lookup, offloading/scheduler.py:773-803, from the block-aligned local hit,
    :849-1000); it waits when its own transfer is in flight (:1246-1251), or when a chunk found is being
    written (HIT_PENDING, kv_offload/cpu/manager.py:199-206) or read by a load (:1020-1045)."""
    tier = _tier(c, s)
    p = m.steps[s].memory
    bs = m.block_sizes[p]
    serial = a.waiting.serial
    if any(j.serial == serial for j in tier.jobs):
        return Found(local, 0, True, "transfer")
    pools = c.sessions[serial].pending.pools
    known = a.needs[pools.index(p)]
    blocks = int(known // bs + EPSILON)
    if blocks - local < 1:
        return Found(local, 0, False, "")
    found = 0
    pending = False
    for b in range(local, blocks):
        chunk = tier.chunks.get(identity(a.content, serial, b, bs))
        if chunk is None:
            break
        found += 1
        pending = pending or not chunk.ready
    if found == 0:
        return Found(local, 0, False, "")
    if pending:
        return Found(local, found, True, "pending")
    loading = {key for j in tier.jobs if j.load for key in j.keys}
    if loading and any(identity(a.content, serial, b, bs) in loading for b in range(local, local + found)):
        return Found(local, found, True, "loading")
    return Found(local, found, False, "")


@rule("offload/lookup", "on a stage with a CPU tier, the head of the first queue it serves is looked up in the tier: the chunks of its known tokens' full blocks past its memory hit, in order, until the first miss (found: the load's units, the memory hit's and theirs); the session is offered from its first chunk again",
      "serq-ref extension (docs/design/cpu-offloading.md): vLLM 0.33.0 scheduler.py:1129-1151 asks the connector past the block-aligned local hit; get_num_new_matched_tokens (offloading/scheduler.py:1210-1277) resets next_stored_chunk_idx and looks the chunks up to the first miss (:773-803, 849-1055)")
def lookup(m: Machine, c: Configuration, s: int, a, found: Found) -> Configuration:
    tier = _tier(c, s)
    request = _request_for(m, c, s, a)._replace(stored=0)
    tier = tier._replace(requests=tier.requests.set(a.waiting.serial, request))
    c = _with_tier(c, s, tier)
    if m.observer:
        m.notify("offload/lookup", c, {"stage": m.stage_name(s), "session": a.waiting.serial, "local": found.local,
                                       "chunks": found.chunks, "wait": found.wait})
    return c


@rule("offload/wait", "on a stage with a CPU tier, the head looked up found a chunk still being written or read by another load, or has a transfer of its own in flight: it is passed over in this iteration, which goes on with the next waiting hold",
      "serq-ref extension (docs/design/cpu-offloading.md): vLLM 0.33.0 get_num_new_matched_tokens answers None (offloading/scheduler.py:1246-1251, 1020-1045; HIT_PENDING kv_offload/cpu/manager.py:199-206) and the scheduler skips the request (scheduler.py:1146-1151, skip_request 1054-1060, requeued in front 1606-1609)")
def wait(m: Machine, c: Configuration, s: int, serial: int, why: str) -> Configuration:
    it = c.stages[s].iteration
    c = c._replace(stages=replace_at(c.stages, s, c.stages[s]._replace(
        iteration=it._replace(skipped=it.skipped + (serial,)))))
    if m.observer:
        m.notify("offload/wait", c, {"stage": m.stage_name(s), "session": serial, "why": why})
    return c


# -- a load -----------------------------------------------------------------------------------------------------


def _use(tier: Tier, serial: int, request: Request, keys: tuple, positions: tuple) -> tuple[Tier, Request]:
    """vLLM 0.33.0's request cache access (kv_offload/cpu/manager.py:163-190; LRUCachePolicy.on_request_access,
    cpu/policies/lru.py): the keys the request had not used are recorded, its rank taken if it has none, and
    each of them the tier holds ranked (its rank, -position) if that is more recent."""
    new = [(k, pos) for k, pos in zip(keys, positions) if k not in request.seen]
    if not new:
        return tier, request
    chunks, next_rank = tier.chunks, tier.next_rank
    rank = request.rank
    if rank is None:
        next_rank += 1
        rank = next_rank
    for key, pos in new:
        chunk = chunks.get(key)
        if chunk is not None and chunk.rank < (rank, -pos):
            chunks = chunks.set(key, chunk._replace(rank=(rank, -pos)))
    request = request._replace(rank=rank, seen=request.seen + tuple(k for k, _ in new))
    return tier._replace(chunks=chunks, next_rank=next_rank), request


@rule("offload/park", "on a stage with a CPU tier, a head that found chunks past its memory hit was admitted as a load (pool/admit, step/load, due L + 1 iterations later, L + 2 under schedule ahead): the chunks it reads are pinned (never evicted while it reads them) and used by its session (their rank raised to its own), its load job is made, and it offers chunks from past those it loaded on",
      "serq-ref extension (docs/design/cpu-offloading.md): vLLM 0.33.0 update_state_after_alloc (offloading/scheduler.py:1351-1500; the chunk-level policy's next_stored_chunk_idx, :1469-1472, kv_offload/base.py:140-141): prepare_load pins the chunks and records the access (kv_offload/cpu/manager.py:214-242), the load job reported in step s + L's output (worker.py:286-321)")
def park(m: Machine, c: Configuration, s: int, serial: int, local: int, chunks_found: int, due: int) -> Configuration:
    tier = _tier(c, s)
    p = m.steps[s].memory
    bs = m.block_sizes[p]
    request = tier.requests[serial]
    positions = tuple(range(local, local + chunks_found))
    keys = tuple(identity(request.content, serial, b, bs) for b in positions)
    chunks = tier.chunks
    for key in keys:
        chunk = chunks[key]
        chunks = chunks.set(key, chunk._replace(pins=chunk.pins + 1))
    tier = tier._replace(chunks=chunks)
    tier, request = _use(tier, serial, request, keys, positions)
    request = request._replace(stored=local + chunks_found)  # the chunk-level policy: it offers past what it loaded
    job = Job(tier.next_job, serial, True, keys, due)
    first = c.sessions[serial].attrs[m.program.slot_computed] == 0.0
    whole = tier.whole + ((serial,) if first and (local + chunks_found) * bs >= request.prompt - EPSILON else ())
    tier = tier._replace(requests=tier.requests.set(serial, request), jobs=tier.jobs + (job,),
                         next_job=tier.next_job + 1, whole=whole)
    c = _with_tier(c, s, tier)
    if m.observer:
        m.notify("offload/park", c, {"stage": m.stage_name(s), "session": serial, "chunks": chunks_found,
                                     "due": due})
    return c


# -- stores, flushes and finishes at the iteration's forming -----------------------------------------------------


def _evict_order(tier: Tier, protected: set) -> list:
    """The evictable chunks (written, read by no load), not protected, by the declared sort key: rank, then key
    order (ranks are unique: the tie never falls)."""
    return sorted((chunk.rank, repr(key), key) for key, chunk in tier.chunks.items()
                  if chunk.ready and chunk.pins == 0 and key not in protected)


def _offer(m: Machine, c: Configuration, s: int, tier: Tier, serial: int, upto: float,
           number: int) -> tuple[Tier, dict | None]:
    """vLLM 0.33.0's store of one request (offloading/scheduler.py:1815-2101, kv_offload/cpu/manager.py:261-373):
    the chunks of its prompt's full blocks below ``upto`` units from the next it has not offered; the tier and
    what happened (None: nothing offered)."""
    facts = m.steps[s]
    p = facts.memory
    bs = m.block_sizes[p]
    request = tier.requests[serial]
    end = int(min(upto, request.prompt) // bs + EPSILON)
    if end <= request.stored:
        return tier, None
    positions = tuple(range(request.stored, end))
    keys = tuple(identity(request.content, serial, b, bs) for b in positions)
    new = tuple((k, b) for k, b in zip(keys, positions) if k not in tier.chunks)
    ready = tuple((k, b) for k, b in zip(keys, positions) if k in tier.chunks and tier.chunks[k].ready)
    used = tuple(sorted(new + ready, key=lambda x: x[1]))
    tier, request = _use(tier, serial, request, tuple(k for k, _ in used), tuple(b for _, b in used))
    if not new:
        tier = tier._replace(requests=tier.requests.set(serial, request._replace(stored=end)))
        return tier, {"session": serial, "stored": 0, "evicted": 0}
    short = len(new) - (facts.offload_chunks - len(tier.chunks))
    evicted = []
    if short > 0:
        order = _evict_order(tier, set(keys))
        if len(order) < short:  # the offer is dropped: made again at its next tokens
            tier = tier._replace(requests=tier.requests.set(serial, request))
            return tier, {"session": serial, "stored": 0, "evicted": 0, "dropped": len(new)}
        evicted = [key for _, _, key in order[:short]]
    chunks = tier.chunks
    for key in evicted:
        chunks = chunks.delete(key)
    rank = request.rank
    next_rank = tier.next_rank
    if rank is None:
        next_rank += 1
        rank = next_rank
    for key, b in new:
        chunks = chunks.set(key, Chunk((rank, -b), False, 0))
    held = request.blocks
    blocks = tuple(held[b] for _, b in new if b < len(held))
    job = Job(tier.next_job, serial, False, tuple(k for k, _ in new),
              number + facts.offload_store_delay + (2 if facts.ahead else 1), blocks)
    request = request._replace(rank=rank, stored=end)
    tier = tier._replace(chunks=chunks, next_rank=next_rank, requests=tier.requests.set(serial, request),
                         jobs=tier.jobs + (job,), next_job=tier.next_job + 1, stored=tier.stored + len(new),
                         evicted=tier.evicted + len(evicted))
    return tier, {"session": serial, "stored": len(new), "evicted": len(evicted)}


def _flushes(m: Machine, c: Configuration, s: int, tier: Tier, it) -> set:
    """The premise of offload/flush: the store jobs whose session was preempted (holds no memory and waits for
    it again), or whose session finished and one of whose blocks an admission of this iteration took (it is in
    an admitted hold's blocks, or no longer in the memory's table)."""
    p = m.steps[s].memory
    table = c.pools[p].table
    taken = set()
    for serial in it.admitted + it.promoted + tuple(load.serial for load in c.stages[s].loads):
        session = c.sessions.get(serial)
        if _holds_memory(session, p):
            h, _ = innermost_hold(session, p)
            hold = table.holds.get((serial, session.holds[h].hold_id))
            if hold is not None:
                taken.update(hold.blocks)
    out = set()
    for job in tier.jobs:
        if job.load:
            continue
        session = c.sessions.get(job.serial)
        if _holds_memory(session, p):
            continue
        if _queued_for(session, p):
            out.add(job.number)
        elif any(b in taken or b not in table.counts for b in job.blocks):
            out.add(job.number)
    return out


@rule("offload/store", "an iteration is formed or dropped on a stage with a CPU tier: each session it gave tokens (in the order it gave them), then each finished session, offers its prompt's chunks complete after them from the next it has not offered; those the tier lacks are written (a store job reported S iterations later; the least recent evictable chunks evicted for them, never the offered ones; if too few can be, the offer is dropped and made again), those it has are used (their rank raised); a store job of a preempted session, or of a finished one whose block an admission took, is flushed (offload/flush: reported with this iteration); a finished session's chunks then become the most recent, its head last",
      "serq-ref extension (docs/design/cpu-offloading.md): vLLM 0.33.0 build_connector_meta (offloading/scheduler.py:2110-2196): jobs to flush (:2136-2165), _build_store_jobs over num_scheduled_tokens then finished_req_ids (:1815-2101; prompt only, base.py:729-730), prepare_store (kv_offload/cpu/manager.py:261-373; LRU cpu/policies/lru.py), on_request_finished (:2175-2183; lru.py on_request_finished)")
def store(m: Machine, c: Configuration, s: int) -> Configuration:
    facts = m.steps[s]
    p = facts.memory
    st = c.stages[s]
    it = st.iteration
    tier = st.tier
    number = it.number
    ahead = 2 if facts.ahead else 1
    offers = []
    seen = set()
    for a in it.assigned:
        if a.job_id < 0 or a.serial in seen or a.serial not in tier.requests:
            continue
        seen.add(a.serial)
        session = c.sessions.get(a.serial)
        if not _holds_memory(session, p):
            continue
        h, k = innermost_hold(session, p)
        request = tier.requests[a.serial]
        held = c.pools[p].table.holds.get((a.serial, session.holds[h].hold_id))
        tier = tier._replace(requests=tier.requests.set(a.serial, request._replace(
            hold=session.holds[h].hold_id, blocks=held.blocks if held is not None else ())))
        tier, what = _offer(m, c, s, tier, a.serial, session.holds[h].allocations[k].position + a.tokens, number)
        if what is not None:
            offers.append(what)
    finished = finished_sessions(m, c._replace(stages=replace_at(c.stages, s, st._replace(tier=tier))), s)
    for serial in finished:
        tier, what = _offer(m, c, s, tier, serial, tier.requests[serial].prompt, number)
        if what is not None:
            offers.append(what)
    # flushes: a preempted session's stores, a finished one's (those just made too) whose block this iteration's
    # admissions took (scheduler.py's allocated block ids, offloading/scheduler.py:2136-2165, 2093-2098)
    flushed = _flushes(m, c, s, tier, it)
    if flushed:
        tier = tier._replace(jobs=tuple(j._replace(due=min(j.due, number + ahead)) if j.number in flushed else j
                                        for j in tier.jobs))
    for serial in finished:  # the finished session's chunks become the most recent, tail first (head last)
        request = tier.requests[serial]
        chunks, next_rank = tier.chunks, tier.next_rank
        bs = m.block_sizes[p]
        order = sorted(request.seen, key=lambda key: _position(key, bs))
        for key in reversed(order):
            chunk = chunks.get(key)
            if chunk is None:
                continue
            next_rank += 1
            chunks = chunks.set(key, chunk._replace(rank=(next_rank, 0)))
        tier = tier._replace(chunks=chunks, next_rank=next_rank, requests=tier.requests.delete(serial))
    c = _with_tier(c, s, tier)
    if m.observer:
        m.notify("offload/store", c, {"stage": m.stage_name(s), "iteration": number,
                                      "offered": len(offers),
                                      "stored": sum(o["stored"] for o in offers),
                                      "evicted": sum(o["evicted"] for o in offers),
                                      "dropped": sum(o.get("dropped", 0) for o in offers),
                                      "flushed": len(flushed), "finished": len(finished)})
    return c


def _position(key: tuple, bs: float) -> float:
    """A chunk's position in its request: its identity's end, over the block size, less one."""
    return sum(length for _, length in key) / bs - 1.0


def store_due(m: Machine, c: Configuration, s: int) -> bool:
    """The premise of offload/store: the stage has a CPU tier and the iteration gave tokens, or a flush or a
    finish is to be made (else the rule would change nothing)."""
    tier = _tier(c, s)
    if tier is None:
        return False
    it = c.stages[s].iteration
    return bool(it.assigned) or bool(tier.jobs) or bool(finished_sessions(m, c, s))


# -- a promotion to no computed token: looked up again (vLLM 0.33.0's one-token livelock) -------------------------


def reloads(m: Machine, c: Configuration, s: int, load) -> Found | None:
    """The premise of offload/reload for the parked load ``load`` whose transfer is done: its hold's position on
    the memory is 0 (it loaded its whole prompt, of one block of one token: promoted to num_tokens - 1 = 0
    computed tokens, scheduler.py:3515-3516) and the tier still has its prompt's chunks from the first on (the
    lookup of a new request: the local hit is capped at num_tokens - 1 = 0); None otherwise (step/promote: it
    computes its token)."""
    tier = _tier(c, s)
    if tier is None:
        return None
    p = m.steps[s].memory
    bs = m.block_sizes[p]
    session = c.sessions[load.serial]
    h, k = innermost_hold(session, p)
    if session.holds[h].allocations[k].position > EPSILON:
        return None
    request = tier.requests.get(load.serial)
    if request is None:
        return None
    found = 0
    pending = False
    for b in range(int(request.prompt // bs + EPSILON)):
        chunk = tier.chunks.get(identity(request.content, load.serial, b, bs))
        if chunk is None:
            break
        found += 1
        pending = pending or not chunk.ready
    if found == 0:
        return None
    loading = {key for j in tier.jobs if j.load for key in j.keys}
    if pending or any(identity(request.content, load.serial, b, bs) in loading for b in range(found)):
        return Found(0, found, True, "pending" if pending else "loading")
    return Found(0, found, False, "")


@rule("offload/reload", "on a stage with a CPU tier, the first parked load whose transfer is done, whose hold's position is 0 (it loaded its whole prompt of one token) and whose chunks the tier still has, is not promoted: it is looked up again as a new request, found, and parked again with a load job of no chunk (its blocks are cached: nothing to copy), due L + 1 iterations later (L + 2 under schedule ahead); if a chunk found is being written or read by another load it waits one iteration; the iteration goes on",
      "serq-ref extension (docs/design/cpu-offloading.md, section 1.7): vLLM 0.33.0 promotes it to num_tokens - 1 = 0 computed tokens (scheduler.py:3515-3516), so the waiting loop, which takes a promoted request to have some (:1265-1266), looks it up as a new one (:1110, :1129-1151); the connector offers the whole prompt again and update_state_after_alloc makes a load job of no chunks, every block already hashed (offloading/scheduler.py:1351-1500): the request never runs")
def reload(m: Machine, c: Configuration, s: int, load, found: Found) -> Configuration:
    facts = m.steps[s]
    st = c.stages[s]
    number = st.iteration.number
    tier = st.tier
    request = tier.requests[load.serial]
    if found.wait:
        due = number + 1
    else:
        due = number + facts.offload_load_delay + (2 if facts.ahead else 1)
        job = Job(tier.next_job, load.serial, True, (), due)
        tier = tier._replace(requests=tier.requests.set(load.serial, request._replace(stored=found.chunks)),
                             jobs=tier.jobs + (job,), next_job=tier.next_job + 1)
    st = st._replace(loads=tuple(x._replace(due=due) if x.serial == load.serial else x for x in st.loads), tier=tier)
    c = c._replace(stages=replace_at(c.stages, s, st))
    if m.observer:
        m.notify("offload/reload", c, {"stage": m.stage_name(s), "session": load.serial, "chunks": found.chunks,
                                       "wait": found.wait, "due": due})
    return c
