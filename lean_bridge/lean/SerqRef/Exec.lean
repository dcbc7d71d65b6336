import SerqRef.Engine

/-!
# The run

A tick is one instant t of the step clock: the delays due at t end (in the
order they started), then the sessions the iteration ending at t finished;
every ready session runs until it blocks (settle); then the engine, if it
has residents, a parked session or a waiting queue, runs one iteration,
which ends at t + 1 if it gave tokens, preempted or (schedule ahead) was
formed while a session was parked; the parked sessions then exit
(`applyParked`). Otherwise the clock moves to the next delay's end, and with
none the machine halts. `Exec.run` ticks at most `fuel` times; `outcome`
reads the first-token and last-token step of every request (observations 0
and 1) and the engine memory's preemptions, `refusals` the value of
observation 2 (why a request was refused). Mirrored in Python:
`lean_bridge/mirror/exec.py`.
-/

namespace SerqRef

/-- workload/arrive: an explicit session arrives at time 0: init runs, its
listed attributes overwrite, it is ready. -/
def spawn (p : Program) (m : Machine) (serial : Nat) : Machine :=
  let attrs := (List.replicate p.attrCount 0).set p.slots.serial serial
  let (m, attrs) := runWorkloadBlock p m p.init serial attrs
  let attrs := overwrite attrs (p.sessions.getD serial default).attrs
  let s : Session :=
    { serial := serial, attrs := attrs, frames := [{ block := p.session, pc := 0, kind := .top }], holds := [],
      pending := none, admission := 0, status := .ready, scriptTurn := 0 }
  { m with sessions := m.sessions ++ [s], ready := m.ready ++ [serial] }

/-- Every explicit session, in serial order. -/
def initial (p : Program) : Machine :=
  (List.range p.sessions.length).foldl (spawn p)
    { time := 0, seq := 0, sessions := [], pools := p.pools.map (fun _ => default), residents := [],
      delays := [], ready := [], samples := [], halted := false }

/-- The engine has residents, a parked session (schedule ahead) or a waiting
queue it serves. -/
def engineWanted (p : Program) (m : Machine) : Bool :=
  !m.residents.isEmpty || !m.parked.isEmpty || (List.range p.pools.length).any (fun q => (p.pool q).viaEngine && !(m.pool q).queue.isEmpty)

/-- The earliest end of a delay. -/
def nextDue : List (Nat × Nat) → Option Nat → Option Nat
  | [], best => best
  | d :: ds, none => nextDue ds (some d.1)
  | d :: ds, some b => nextDue ds (if d.1 < b then some d.1 else some b)

/-- step/idle: no iteration: the clock moves to the next delay's end; with
none, nothing can happen any more. -/
def idle (m : Machine) : Machine :=
  match nextDue m.delays none with
  | none => { m with halted := true }
  | some t => { m with time := t }

/-- stage/ps-complete on a delay stage: the delays due now end, in the order
they started; their sessions are ready, ahead of those the last iteration
finished (their events were scheduled earlier). -/
def releaseDue (m : Machine) : Machine :=
  let due := (m.delays.filter (fun d => decide (d.1 ≤ m.time))).map (·.2)
  let m := { m with delays := m.delays.filter (fun d => !decide (d.1 ≤ m.time)), ready := due ++ m.ready }
  due.foldl (fun m serial => let s := m.session serial; m.putSession { s with status := .ready }) m

/-- step/apply: the iteration is formed; the ended one's results are
applied: the parked sessions become ready, in the order they parked, and
each runs (its hold exits: they are no longer finishing). vLLM 0.33.0
applies batch k's output after forming batch k+1
(EngineCore.step_with_batch_queue, vllm/v1/engine/core.py:745-769,
778-796). -/
def applyParked (p : Program) (m : Machine) : Machine :=
  m.parked.foldl (fun m serial =>
    let s := m.session serial
    runSession p p.fuel (m.putSession { s with status := .ready }) serial) { m with parked := [] }

/-- One instant (see the module's comment). Under schedule ahead the
iteration starts with no session finishing any more (those that did not park
went on); it is formed (an iteration, though empty) while a session is parked
(vLLM queues the empty batch, vllm/v1/engine/core.py:745-768), and then the
parked sessions exit (`applyParked`) before it ends. -/
def tick (p : Program) (m : Machine) : Machine :=
  if m.halted then m
  else
    let m := runReady p (releaseDue m)
    if engineWanted p m then
      match serve p p.serveFuel { m with finishing := [] } (startIteration p m) with
      | (m, it) =>
        if !it.assigned.isEmpty || it.preempted || !m.parked.isEmpty then endIteration p (applyParked p m) it
        else idle m
    else idle m

namespace Exec

/-- At most `fuel` ticks, stopping when the machine halts. -/
def run (p : Program) : Nat → Machine → Machine
  | 0, m => m
  | n + 1, m => if m.halted then m else run p n (tick p m)

end Exec

/-- (serial, time) of every sample of observation `index`, in the order taken. -/
def timesOf (index : Nat) (samples : List Sample) : List (Nat × Nat) :=
  (samples.filter (fun x => x.index == index)).map (fun x => (x.serial, x.time))

def insertBySerial (x : Nat × Nat) : List (Nat × Nat) → List (Nat × Nat)
  | [] => [x]
  | y :: ys => if x.1 < y.1 then x :: y :: ys else y :: insertBySerial x ys

/-- An insertion sort by serial (equal serials keep their order). -/
def bySerial (xs : List (Nat × Nat)) : List (Nat × Nat) :=
  xs.foldl (fun acc x => insertBySerial x acc) []

/-- (serial, value) of every sample of observation `index`, in the order taken. -/
def valuesOf (index : Nat) (samples : List Sample) : List (Nat × Nat) :=
  (samples.filter (fun x => x.index == index)).map (fun x => (x.serial, x.value))

/-- The first-token and last-token step of every request, sorted by serial,
and the preemptions of the engine's memory. -/
def outcome (p : Program) (fuel : Nat) : List (Nat × Nat) × List (Nat × Nat) × Nat :=
  let m := Exec.run p fuel (initial p)
  (bySerial (timesOf 0 m.samples), bySerial (timesOf 1 m.samples), (m.pool p.engine.memory).preemptions)

/-- The value of observation 2 (the oracle harness's `refused`: why a request
was refused, 1 the configuration, 2 its prompt, 3 it never fits) per request
that took it, sorted by serial. -/
def refusals (p : Program) (fuel : Nat) : List (Nat × Nat) :=
  bySerial (valuesOf 2 (Exec.run p fuel (initial p)).samples)

end SerqRef
