import SerqRef.Sessions

/-!
# The step engine's iteration

One iteration at time t on the step clock (cost 1): `startIteration` reads
the budget and the chunk once; `serve` applies one rule a turn: it gives
tokens to the residents in serving order (`pickNext`, `schedule`; a growing
run's tokens wait for `growTurn`, which grows its hold or preempts the last
resident holding the pool, `withdraw` taking back a victim's tokens), then
admits the heads of the queues the engine serves (`admitHead`) while budget
is left, never in an iteration that preempted; `endIteration`, at t + 1,
applies the tokens. Under `schedule ahead` (vLLM 0.33.0's asynchronous
scheduling) a parked session counts among the residents, is a victim
candidate (`preemptParked`), and the decodes served are remembered
(`decoded`: their last token is not cached yet when preempted). Mirrored in
Python: `lean_bridge/mirror/engine.py`.
-/

namespace SerqRef

/-- step/iteration-start: the budget and the chunk, read once with the
residents before the iteration. -/
def startIteration (p : Program) (m : Machine) : Iteration :=
  let v := m.engineEnv
  let budget := eval p m v p.engine.budget
  { budget := budget, chunk := eval p m v p.engine.chunk, residents := m.residents.length + m.parked.length,
    decoders := countDecoders m.residents, left := budget, served := [], assigned := [],
    preempted := false, stopped := false, blocked := false, pending := none }

/-- What a serve key reads for a resident. -/
def residentEnv (m : Machine) (it : Iteration) (r : Resident) : Env :=
  { attrs := (m.session r.serial).attrs, serial := r.serial, time := m.time, residents := it.residents,
    decoders := it.decoders, decoding := if r.mode == .decode then 1 else 0, admission := r.admission,
    remaining := r.remaining, budgetLeft := 0 }

def serveKeysOf (p : Program) (m : Machine) (it : Iteration) (r : Resident) : List Nat :=
  p.engine.serve.map (fun k => eval p m (residentEnv m it r) k.key)

/-- `a` strictly before `b`: ascending keys, a negated key descending. -/
def keyBefore : List ServeKey → List Nat → List Nat → Bool
  | k :: ks, x :: xs, y :: ys =>
    (match k.order with
     | .asc => decide (x < y)
     | .desc => decide (y < x)) || (x == y && keyBefore ks xs ys)
  | _, _, _ => false

/-- The first unserved resident in serving order: the serve keys, then the
residents' order (the first of equals). -/
def pickNext (p : Program) (m : Machine) (it : Iteration) : List Resident → Option Resident → Option Resident
  | [], best => best
  | r :: rs, best =>
    if it.served.contains r.serial then pickNext p m it rs best
    else
      match best with
      | none => pickNext p m it rs (some r)
      | some b =>
        if keyBefore p.engine.serve (serveKeysOf p m it r) (serveKeysOf p m it b) then pickNext p m it rs (some r)
        else pickNext p m it rs best

/-- The resident's tokens, taken from the budget left. -/
def assign (it : Iteration) (serial tokens : Nat) : Iteration :=
  { it with assigned := it.assigned ++ [({ serial := serial, tokens := tokens } : Assignment)], left := it.left - tokens }

/-- The tokens the iteration gave the session. -/
def tokensOf (serial : Nat) : List Assignment → Nat
  | [] => 0
  | a :: rest => (if a.serial == serial then a.tokens else 0) + tokensOf serial rest

/-- The mode of the session's run on the engine (`none`: not a resident). -/
def residentMode (m : Machine) (serial : Nat) : Option Mode :=
  (m.residents.find? (fun r => r.serial == serial)).map (·.mode)

/-- A resident of the engine, or (schedule ahead) parked there: vLLM's
running list, where a finished request stays until its batch's output is
applied (scheduler.py:938, 970). -/
def candidate (m : Machine) (serial : Nat) : Bool :=
  (residentMode m serial).isSome || m.parked.contains serial

/-- What a `preempt by` key reads for a candidate: its attributes, its
latest admission, whether it decodes (a parked session has run its last
decode). -/
def victimEnv (m : Machine) (serial : Nat) : Env :=
  let s := m.session serial
  { attrs := s.attrs, serial := serial, time := m.time, residents := m.residents.length + m.parked.length,
    decoders := countDecoders m.residents, decoding := if residentMode m serial == some Mode.prefill then 0 else 1,
    admission := s.admission, remaining := 0, budgetLeft := 0 }

/-- The candidate `a` is chosen before `b`: under `preempt by` the least keys
(vLLM 0.33.0's priority path: the running request with the largest
(priority, arrival_time), scheduler.py:932-936, is `preempt by (-priority,
-arrival)`), keys that tie and lifo to the latest admission (seed 002 §3
Ties). -/
def betterVictim (p : Program) (m : Machine) (q a b : Nat) : Bool :=
  let keys := (p.pool q).victim
  let ka := keys.map (fun k => eval p m (victimEnv m a) k.key)
  let kb := keys.map (fun k => eval p m (victimEnv m b) k.key)
  if keyBefore keys ka kb then true
  else if keyBefore keys kb ka then false
  else decide ((m.session b).admission < (m.session a).admission)

/-- The premise of pool/preempt: of the pool's holders that are residents
of the engine or parked there, the last admitted (lifo), or under `preempt
by` the one with the least keys. -/
def victimOf (p : Program) (m : Machine) (q : Nat) : Option Nat :=
  (m.pool q).holders.foldl (fun best h =>
    if candidate m h.serial then
      (match best with
       | none => some h.serial
       | some b => if betterVictim p m q h.serial b then some h.serial else best)
    else best) none

/-- Under schedule ahead, 1 when the last iteration gave the victim a decode
token and the one being formed has not served it yet: that token's id is
applied only after this iteration is formed, so its position is not cached
yet (vLLM hashes a block once its tokens' ids are known:
kv_cache_manager.py:615-625, scheduler.py:2403-2415); else 0. -/
def inFlight (p : Program) (m : Machine) (it : Iteration) (victim : Nat) : Nat :=
  if p.engine.ahead && m.decoded.contains victim && !it.assigned.any (fun a => a.serial == victim) then 1 else 0

/-- step/withdraw and pool/preempt: the victim's tokens go back to the
budget; it is preempted; the iteration admits nothing more. -/
def withdraw (p : Program) (m : Machine) (it : Iteration) (victim q : Nat) : Machine × Iteration :=
  let unhashed := inFlight p m it victim
  let back := tokensOf victim it.assigned
  (preempt p m victim q unhashed,
   { it with assigned := it.assigned.filter (fun a => a.serial != victim), left := it.left + back,
             preempted := true })

/-- step/preempt-parked: the victim is parked (its last token in flight): it
is no longer parked, the preemption is counted (the iteration admits nothing
more), and its hold exits at once, its session going on; it never runs
again. vLLM 0.33.0 preempts running[-1] even when its last token is in
flight (scheduler.py:938, 970; _preempt_request 1799-1843 frees its blocks)
and the stale token then stops it while PREEMPTED (scheduler.py:2318-2323,
2494, 2545-2548). -/
def preemptParked (p : Program) (m : Machine) (it : Iteration) (victim q : Nat) : Machine × Iteration :=
  let ps := m.pool q
  let m := ({ m with parked := m.parked.filter (fun x => x != victim) }).putPool q
    { ps with preemptions := ps.preemptions + 1 }
  let s := m.session victim
  (runSession p p.fuel (m.putSession { s with status := .ready }) victim, { it with preempted := true })

/-- step/grow, one turn: the pending grower's hold on `q` grows to the
position its tokens reach (pool/grow), and its tokens are assigned; if that
does not fit, the last resident holding `q` is preempted (step/withdraw) and
the growth is tried again at the next turn, unless the grower was its own
victim: then the pass ends (`.ends`: nobody else is served) or goes on with
the next resident (`.continues`); either way, having preempted, it admits
nothing. -/
def growTurn (p : Program) (m : Machine) (it : Iteration) (serial q tokens : Nat) : Machine × Iteration :=
  let done := { it with pending := none }
  match innermostHolder m serial q with
  | none => (m, assign done serial tokens)
  | some a =>
    let pool := p.pool q
    let ps := m.pool q
    let need := blocksFor (a.position + tokens) pool.block - a.blocks
    if need = 0 then (m, assign done serial tokens)
    else if heldBlocks ps.holders + need ≤ pool.cap then
      (m.putPool q (growHolder ps pool serial a.hold need), assign done serial tokens)
    else
      match victimOf p m q with
      | none => (m, { done with stopped := true })
      | some v =>
        if m.parked.contains v then preemptParked p m it v q
        else
          match withdraw p m it v q with
          | (m, it) =>
            if v == serial then
              match p.engine.selfPreemption with
              | .ends => (m, { it with pending := none, stopped := true })
              | .continues => (m, { it with pending := none })
            else (m, it)

/-- step/schedule: the next resident in serving order is served: one token
to a decode, up to the chunk to a prefill, within the budget left; a growing
run's tokens wait for its growth (`pending`). -/
def schedule (it : Iteration) (r : Resident) : Iteration :=
  let it := { it with served := it.served ++ [r.serial] }
  let tokens := min (want it.chunk r) it.left
  match r.growing with
  | none => assign it r.serial tokens
  | some q => { it with pending := some (r.serial, q, tokens) }

/-- What a `queue by` key reads for a waiting session (its header's
environment, budget_left the budget left). -/
def queueEnv (m : Machine) (serial left : Nat) : Env :=
  m.envOf (m.session serial) left

/-- The hold the pool tries: the queue's first (fifo), or under `queue by`
the least keys, then the first joined (the queue is in join order): vLLM
0.33.0's priority heap on (priority, arrival_time) (request_queue.py:131-166,
request.py:357-367). -/
def headOf (p : Program) (m : Machine) (q left : Nat) : Option Nat :=
  let keys := (p.pool q).queue
  (m.pool q).queue.foldl (fun best serial =>
    match best with
    | none => some serial
    | some b =>
      if keyBefore keys (keys.map (fun k => eval p m (queueEnv m serial left) k.key))
          (keys.map (fun k => eval p m (queueEnv m b left) k.key)) then some serial
      else best) none

/-- The first pool (declaration order) the engine admits to that has a
waiting session. -/
def firstWaiting (p : Program) (m : Machine) : List Nat → Option Nat
  | [] => none
  | q :: qs => if (p.pool q).viaEngine && !(m.pool q).queue.isEmpty then some q else firstWaiting p m qs

/-- Every pool has room for the units and for the reserve next to what is
allocated (cached blocks never block). -/
def fits (p : Program) (m : Machine) (v : Env) : List Use → List Nat → Bool
  | u :: us, x :: xs =>
    let pool := p.pool u.pool
    let held := heldBlocks (m.pool u.pool).holders
    if decide (held + blocksFor x pool.block ≤ pool.cap) &&
        decide (held + blocksFor (reserveOf p m v u) pool.block ≤ pool.cap) then fits p m v us xs
    else false
  | _, _ => true

/-- pool/consume, pool/evict-*, pool/admit on one pool: with a cache clause
the session takes up to `reuse` units of its own prefix; room is made; the
units are allocated in blocks. -/
def admitPool (p : Program) (serial holdId : Nat) (caching : Bool) (reuse : Option Nat) :
    Machine × Nat → Nat × Nat → Machine × Nat
  | (m, cached), (q, units) =>
    let pool := p.pool q
    let ps := m.pool q
    let (entries, consumed) :=
      if caching then consumeEntries serial (reuse.map (· / pool.block)) ps.entries else (ps.entries, 0)
    let take := blocksFor units pool.block
    let entries := evict (heldBlocks ps.holders) take pool.cap entries
    let holder : Holder :=
      { serial := serial, hold := holdId, blocks := take,
        position := min (consumed * pool.block) (take * pool.block), advanced := false }
    (m.putPool q { ps with entries := entries, holders := ps.holders ++ [holder] }, max cached (consumed * pool.block))

/-- pool/admit: the head leaves the queue, takes its units on every pool of
its hold, and its body starts; `cached` is what it consumed. -/
def admit (p : Program) (m : Machine) (q serial : Nat) (stmt : Nat × Nat) (uses : List Use) (body : Nat)
    (caching : Bool) (units : List Nat) (reuse : Option Nat) : Machine :=
  let holdId := m.seq
  let ps := m.pool q
  let m := m.putPool q { ps with queue := ps.queue.filter (fun x => x != serial) }
  let (m, cached) := ((uses.map (·.pool)).zip units).foldl (admitPool p serial holdId caching reuse) (m, 0)
  let s := m.session serial
  let s := { s with attrs := s.attrs.set p.slots.cached cached,
                    frames := { block := body, pc := 0, kind := .body } :: s.frames,
                    holds := { id := holdId, stmt := stmt, pools := uses.map (·.pool) } :: s.holds,
                    pending := none, admission := holdId, status := .ready }
  let m := m.putSession s
  { m with seq := holdId + 1 }

/-- step/admit: the head of the first queue the engine serves, its header
read with budget_left = the budget left; if it fits it is admitted (and
returned, to run until it blocks: joining the engine it is the next to be
scheduled); if not, nothing more is admitted in this iteration. -/
def admitHead (p : Program) (m : Machine) (it : Iteration) : Option (Machine × Iteration × List Nat) :=
  match firstWaiting p m (List.range p.pools.length) with
  | none => none
  | some q =>
    match headOf p m q it.left with
    | none => none
    | some serial =>
      let s := m.session serial
      match s.pending with
      | none => none
      | some stmt =>
        match p.stmtAt stmt.1 stmt.2 with
        | some (.hold uses reuse body cache) =>
          let v := m.envOf s it.left
          let units := uses.map (fun u => eval p m v u.units)
          if fits p m v uses units then
            some (admit p m q serial stmt uses body cache.isSome units (reuse.map (eval p m v)), it, [serial])
          else some (m, { it with blocked := true }, [])
        | _ => none

/-- The iteration's loop, one rule a turn: a pending growth (step/grow);
else, while budget is left and no grower stopped it, the next resident in
serving order (step/schedule); then admissions (step/admit, and the admitted
session runs), unless the iteration preempted or a head did not fit. -/
def serve (p : Program) : Nat → Machine → Iteration → Machine × Iteration
  | 0, m, it => (m, it)
  | n + 1, m, it =>
    match it.pending with
    | some (serial, q, tokens) =>
      match growTurn p m it serial q tokens with
      | (m, it) => serve p n m it
    | none =>
      if it.left == 0 || it.stopped then (m, it)
      else
        match pickNext p m it m.residents none with
        | some r => serve p n m (schedule it r)
        | none =>
          if it.preempted || it.blocked then (m, it)
          else
            match admitHead p m it with
            | none => (m, it)
            | some (m, it, ran) => serve p n (ran.foldl (fun m serial => runSession p p.fuel m serial) m) it

/-- step/iteration-end, per resident: its run has `tokens` fewer left; a
growing run's hold advances its position. -/
def applyTokens (m : Machine) (a : Assignment) : Machine :=
  match m.residents.find? (fun r => r.serial == a.serial) with
  | none => m
  | some r =>
    let m := { m with residents := m.residents.map (fun x =>
      if x.serial == a.serial then { x with remaining := x.remaining - a.tokens } else x) }
    match r.growing with
    | none => m
    | some q =>
      match innermostHolder m a.serial q with
      | none => m
      | some h =>
        let ps := m.pool q
        m.putPool q { ps with holders := ps.holders.map (fun x =>
          if x.serial == h.serial && x.hold == h.hold then { x with position := x.position + a.tokens, advanced := true }
          else x) }

/-- The served runs that have no token left, in the order served. -/
def finishedOf (m : Machine) : List Assignment → List Nat
  | [] => []
  | a :: rest =>
    if m.residents.any (fun x => x.serial == a.serial && x.remaining == 0) then a.serial :: finishedOf m rest
    else finishedOf m rest

/-- The served runs that decode, in the order served. -/
def decodedOf (m : Machine) (assigned : List Assignment) : List Nat :=
  (assigned.filter (fun a => residentMode m a.serial == some Mode.decode)).map (·.serial)

/-- step/iteration-end and stage/step-complete: one step later the tokens
apply; the runs with none left complete, in the order served, and their
sessions are ready. Under schedule ahead their sessions are `finishing`
until the next iteration starts (step/park), and the decodes served are
`decoded`. -/
def endIteration (p : Program) (m : Machine) (it : Iteration) : Machine :=
  let m := { m with time := m.time + 1 }
  let m := if p.engine.ahead then { m with decoded := decodedOf m it.assigned } else m
  let m := it.assigned.foldl applyTokens m
  let finished := finishedOf m it.assigned
  let m := if p.engine.ahead then { m with finishing := finished } else m
  let m := { m with residents := m.residents.filter (fun x => x.remaining != 0), ready := m.ready ++ finished }
  finished.foldl (fun m serial => let s := m.session serial; m.putSession { s with status := .ready }) m

end SerqRef
