import SerqRef.Pools

/-!
# Sessions

One rule per statement, the end of a block, the end of a session, joining a
hold's queue, preemption. A ready session runs until it blocks: it joins a
queue (`enterHold`), becomes a resident of the engine (`enterEngine`), starts
a delay, or ends. Mirrored in Python: `lean_bridge/mirror/sessions.py`.
-/

namespace SerqRef

/-- The cache clause of the hold statement at `stmt`. -/
def cacheOf (p : Program) (stmt : Nat × Nat) : Option Expr :=
  match p.stmtAt stmt.1 stmt.2 with
  | some (.hold _ _ _ c) => c
  | _ => none

/-- pool/release on `q`: with a cache clause, min(cache, computed) units
stay cached; on the engine's memory `unhashed` units at the end of the
position are not (schedule ahead: a preempted decode's token in flight,
`inFlight`). -/
def releasePool (p : Program) (m : Machine) (s : Session) (h : ActiveHold) (q : Nat) (preempted : Bool)
    (unhashed : Nat) : Machine :=
  let pool := p.pool q
  let ps := m.pool q
  match findHolder s.serial h.id ps.holders with
  | none => m
  | some a =>
    let computed := computedUnits pool a preempted - (if q == p.engine.memory then unhashed else 0)
    let kept :=
      match cacheOf p h.stmt with
      | none => 0
      | some e => keptBlocks pool a (eval p m (m.envOf s (plan p m)) e) computed
    m.putPool q (releaseUnits ps s.serial h.id kept)

/-- Every pool of the hold, in the hold's order. -/
def releaseHold (p : Program) (m : Machine) (s : Session) (h : ActiveHold) (preempted : Bool) (unhashed : Nat) :
    Machine :=
  h.pools.foldl (fun m q => releasePool p m s h q preempted unhashed) m

/-- session/end: every hold released, innermost first; cached prefixes stay. -/
def endSession (p : Program) (m : Machine) (s : Session) : Machine :=
  let m := s.holds.foldl (fun m h => releaseHold p m s h false 0) m
  m.putSession { s with status := .ended, frames := [], holds := [], pending := none }

/-- The premise of step/park: under schedule ahead, the session's run
completed at the end of the last iteration and the hold it exits holds the
engine's memory. -/
def parks (p : Program) (m : Machine) (s : Session) (h : ActiveHold) : Bool :=
  p.engine.ahead && m.finishing.contains s.serial && h.pools.contains p.engine.memory

/-- step/park: the session waits at the exit of its hold, its units held,
until the next iteration is formed (step/apply): it counts among the
residents that iteration is formed with, is not served, and can be a victim
(vLLM 0.33.0 forms batch k+1 before applying batch k's output,
vllm/v1/engine/core.py:708-825: a request whose last token batch k sampled
is skipped, scheduler.py:800-814, and keeps its blocks and its running slot
until update_from_output frees it, scheduler.py:2476, 2543-2544). -/
def park (m : Machine) (s : Session) : Machine :=
  let m := { m with finishing := m.finishing.filter (fun x => x != s.serial), parked := m.parked ++ [s.serial] }
  m.putSession { s with status := .parked }

/-- session/hold-exit: the body ended: the hold is released with its cache
clause, `computed` is 0 again (unless it parks). -/
def exitHold (p : Program) (m : Machine) (s : Session) : Machine :=
  match s.holds, s.frames with
  | h :: hs, _ :: fs =>
    if parks p m s h then park m s
    else
      let m := releaseHold p m s h false 0
      m.putSession { s with frames := fs, holds := hs, attrs := s.attrs.set p.slots.computed 0 }
  | _, _ => m.putSession { s with frames := s.frames.tail }

/-- A use's reserve (0 without one). -/
def reserveOf (p : Program) (m : Machine) (v : Env) (u : Use) : Nat :=
  match u.reserve with
  | none => 0
  | some r => eval p m v r

/-- session/hold-enter and pool/reject: the hold joins its first pool's
queue, at the head after a preemption (under `requeue by key` at its end, as
any hold: vLLM 0.33.0's priority queue pushes a preempted request back into
its heap, request_queue.py:160-166); a hold whose units or reserve, read
now, are above a cap can never fit: the session ends. -/
def enterHold (p : Program) (m : Machine) (s : Session) (stmt : Nat × Nat) (head : Bool) : Machine :=
  match p.stmtAt stmt.1 stmt.2 with
  | some (.hold uses _ _ _) =>
    let v := m.envOf s (plan p m)
    if uses.any (fun u => decide ((p.pool u.pool).cap <
          blocksFor (max (eval p m v u.units) (reserveOf p m v u)) (p.pool u.pool).block)) then
      endSession p m s
    else
      let q :=
        match uses with
        | u :: _ => u.pool
        | [] => 0
      let ps := m.pool q
      let queue := if head && !(p.pool q).requeueKey then s.serial :: ps.queue else ps.queue ++ [s.serial]
      (m.putPool q { ps with queue := queue }).putSession { s with status := .queued, pending := some stmt }
  | _ => m

/-- The holds from the innermost out to the one admitted as `id`. -/
def takeThrough (id : Nat) : List ActiveHold → List ActiveHold
  | [] => []
  | h :: hs => if h.id == id then [h] else h :: takeThrough id hs

/-- The frames without the innermost `k` hold bodies and everything inside them. -/
def popBodies : Nat → List Frame → List Frame
  | 0, fs => fs
  | _ + 1, [] => []
  | k + 1, f :: fs => if f.kind == .body then popBodies k fs else popBodies (k + 1) fs

/-- pool/preempt: the victim leaves the engine; `computed` is the position
its hold on `q` reached, or what it was if that is further (a hold preempted
again while it recomputes keeps the furthest position it reached:
docs/semantics.md, "computed after a second preemption"); that hold and
every hold inside it are released with the computed prefix cached; it
re-enters the head of its hold's queue; `unhashed` units at the end of its
position are not cached (`inFlight`). -/
def preempt (p : Program) (m : Machine) (victim q unhashed : Nat) : Machine :=
  let s := m.session victim
  match innermostHold s q with
  | none => m
  | some target =>
    let position :=
      match findHolder victim target.id (m.pool q).holders with
      | some a => a.position
      | none => 0
    let s := { s with attrs := s.attrs.set p.slots.computed (max position (s.attrs.getD p.slots.computed 0)) }
    let m := { m with residents := m.residents.filter (fun r => r.serial != victim) }
    let releasing := takeThrough target.id s.holds
    let m := releasing.foldl (fun m h => releaseHold p m s h true unhashed) m
    let s := { s with holds := s.holds.drop releasing.length,
                      frames := popBodies releasing.length s.frames, status := .ready }
    let ps := m.pool q
    let m := m.putPool q { ps with preemptions := ps.preemptions + 1 }
    enterHold p (m.putSession s) s target.stmt true

/-- Each (slot, value) in turn. -/
def overwrite (attrs : List Nat) (pairs : List (Nat × Nat)) : List Nat :=
  pairs.foldl (fun a kx => a.set kx.1 kx.2) attrs

/-- A statement of init or turn (set and observe). -/
def workloadStmt (p : Program) (serial : Nat) : Machine × List Nat → Stmt → Machine × List Nat
  | (m, attrs), .set k e => (m, attrs.set k (eval p m (m.envWith attrs serial 0) e))
  | (m, attrs), .observe i e =>
    let sample : Sample :=
      { index := i, serial := serial, time := m.time, value := eval p m (m.envWith attrs serial 0) e }
    ({ m with samples := m.samples ++ [sample] }, attrs)
  | state, _ => state

/-- init or turn, statement by statement. -/
def runWorkloadBlock (p : Program) (m : Machine) (block serial : Nat) (attrs : List Nat) : Machine × List Nat :=
  (p.blocks.getD block []).foldl (workloadStmt p serial) (m, attrs)

/-- session/turn: turn_no counts, the next explicit turn's attributes, `more`, then the turn block. -/
def takeTurn (p : Program) (m : Machine) (s : Session) : Machine :=
  let attrs := s.attrs.set p.slots.turnNo (s.attrs.getD p.slots.turnNo 0 + 1)
  let turns := (p.sessions.getD s.serial default).turns
  let (attrs, following) :=
    match turns[s.scriptTurn]? with
    | some t => (overwrite attrs t, s.scriptTurn + 1)
    | none => (attrs, s.scriptTurn)
  let attrs := attrs.set p.slots.more (if following < turns.length then 1 else 0)
  let (m, attrs) := runWorkloadBlock p m p.turn s.serial attrs
  m.putSession { s with attrs := attrs, scriptTurn := following }

/-- The residents' order: (admission, job). -/
def residentBefore (a b : Resident) : Bool :=
  decide (a.admission < b.admission) || (a.admission == b.admission && decide (a.job < b.job))

def insertResident (r : Resident) : List Resident → List Resident
  | [] => [r]
  | x :: xs => if residentBefore r x then r :: x :: xs else x :: insertResident r xs

/-- stage/step-enter: a resident of the engine with `work` tokens to run. -/
def enterEngine (m : Machine) (s : Session) (mode : Mode) (work : Nat) (growing : Option Nat) : Machine :=
  let r : Resident :=
    { serial := s.serial, admission := s.admission, job := m.seq, mode := mode, remaining := work,
      growing := growing }
  let m := m.putSession { s with status := .resident }
  { m with residents := insertResident r m.residents, seq := m.seq + 1 }

/-- The statement's rule (`s` already points past it). -/
def executeStmt (p : Program) (m : Machine) (s : Session) (stmt : Nat × Nat) : Stmt → Machine
  | .set k e => m.putSession { s with attrs := s.attrs.set k (eval p m (m.envOf s (plan p m)) e) }
  | .observe i e =>
    let value := eval p m (m.envOf s (plan p m)) e
    let m := m.putSession s
    { m with samples := m.samples ++ [({ index := i, serial := s.serial, time := m.time, value := value } : Sample)] }
  | .turn => takeTurn p m s
  | .hold _ _ _ _ => enterHold p m s stmt false
  | .step mode work growing =>
    let w := eval p m (m.envOf s (plan p m)) work
    if w = 0 then m.putSession s else enterEngine m s mode w growing
  | .delay _ work =>
    let w := eval p m (m.envOf s (plan p m)) work
    if w = 0 then m.putSession s
    else
      let m := m.putSession { s with status := .delayed }
      { m with delays := m.delays ++ [(m.time + w, s.serial)] }
  | .branch guard thenBlock elseBlock =>
    let taken := if eval p m (m.envOf s (plan p m)) guard = 1 then thenBlock else elseBlock
    m.putSession { s with frames := { block := taken, pc := 0, kind := .plain } :: s.frames }
  | .finish => endSession p m s

/-- The session's next statement, or the end of its innermost block
(session/end, session/hold-exit, session/block-exit). -/
def execute (p : Program) (m : Machine) (s : Session) : Machine :=
  match s.frames with
  | [] => endSession p m s
  | f :: fs =>
    match p.stmtAt f.block f.pc with
    | some st => executeStmt p m { s with frames := { f with pc := f.pc + 1 } :: fs } (f.block, f.pc) st
    | none =>
      match f.kind with
      | .top => endSession p m s
      | .body => exitHold p m s
      | .plain => m.putSession { s with frames := fs }

/-- The session runs while it is ready (at most `fuel` steps). -/
def runSession (p : Program) : Nat → Machine → Nat → Machine
  | 0, m, _ => m
  | n + 1, m, serial =>
    let s := m.session serial
    if s.status == .ready then runSession p n (execute p m s) serial else m

/-- settle: every ready session runs, in the order they became ready. -/
def runReady (p : Program) (m : Machine) : Machine :=
  m.ready.foldl (fun m serial => runSession p p.fuel m serial) { m with ready := [] }

end SerqRef
