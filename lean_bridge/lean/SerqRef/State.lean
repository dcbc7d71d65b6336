import SerqRef.Syntax

/-!
# The machine's state

Sessions (their continuation as a stack of frames, their active holds), the
pools (holders in admission order, cache entries in release order, the
queue), the engine's residents, the delays in flight, the samples taken.
Mirrored in Python: `lean_bridge/mirror/state.py`.
-/

namespace SerqRef

inductive FrameKind where
  /-- the session's own block: its end ends the session -/
  | top
  /-- a hold's body: its end exits the hold -/
  | body
  /-- a branch's block: its end returns to the parent -/
  | plain
  deriving Repr, DecidableEq, Inhabited

/-- A block being executed; `pc` is its next statement (a parent's `pc`
already points past the statement that opened the child). -/
structure Frame where
  block : Nat
  pc : Nat
  kind : FrameKind
  deriving Repr, Inhabited

/-- A hold the session is in: its admission number, the hold statement
(block, index), the pools it holds. -/
structure ActiveHold where
  id : Nat
  stmt : Nat × Nat
  pools : List Nat
  deriving Repr, Inhabited

inductive Status where
  | ready
  | queued
  | resident
  | delayed
  | ended
  /-- schedule ahead: at the exit of its hold on the memory until the next iteration is formed -/
  | parked
  deriving Repr, DecidableEq, Inhabited

structure Session where
  serial : Nat
  attrs : List Nat
  /-- innermost first -/
  frames : List Frame
  /-- innermost first -/
  holds : List ActiveHold
  /-- the hold statement it waits to be admitted to -/
  pending : Option (Nat × Nat)
  /-- its latest admission number -/
  admission : Nat
  status : Status
  /-- the explicit turns taken -/
  scriptTurn : Nat
  deriving Repr

instance : Inhabited Session :=
  ⟨{ serial := 0, attrs := [], frames := [], holds := [], pending := none, admission := 0, status := .ended,
     scriptTurn := 0 }⟩

/-- An allocation: the blocks held by the session's hold `hold`; `position`
the tokens it has computed; `advanced` whether a growing run moved it (if
not, its computed prefix is the whole allocation). -/
structure Holder where
  serial : Nat
  hold : Nat
  blocks : Nat
  position : Nat
  advanced : Bool
  deriving Repr, Inhabited

/-- A cached prefix: its owner (`none`: dead) and its blocks. -/
structure Entry where
  owner : Option Nat
  blocks : Nat
  deriving Repr, Inhabited

structure PoolState where
  /-- admission order -/
  holders : List Holder
  /-- release order: the least recently released first -/
  entries : List Entry
  /-- serials, the head first -/
  queue : List Nat
  preemptions : Nat
  deriving Repr

instance : Inhabited PoolState := ⟨{ holders := [], entries := [], queue := [], preemptions := 0 }⟩

/-- A run on the engine; `admission` is its session's latest admission
number (the residents' order), `job` the sequence number it entered with. -/
structure Resident where
  serial : Nat
  admission : Nat
  job : Nat
  mode : Mode
  remaining : Nat
  growing : Option Nat
  deriving Repr, Inhabited

structure Assignment where
  serial : Nat
  tokens : Nat
  deriving Repr, Inhabited

/-- One iteration while it is scheduled: the budget and chunk read at its
start with the residents and decoders then; the budget left; the residents
served and their tokens (in the order served); whether it preempted, whether
a grower preempted itself (`stopped`: nobody else is served), whether a head
did not fit (`blocked`: nobody else is admitted); `pending`, the resident
being scheduled whose hold must grow before its tokens count: (serial, pool,
tokens). -/
structure Iteration where
  budget : Nat
  chunk : Nat
  residents : Nat
  decoders : Nat
  left : Nat
  served : List Nat
  assigned : List Assignment
  preempted : Bool
  stopped : Bool
  blocked : Bool
  pending : Option (Nat × Nat × Nat)
  deriving Repr, Inhabited

/-- An observation: its index, the session, the time, the value. -/
structure Sample where
  index : Nat
  serial : Nat
  time : Nat
  value : Nat
  deriving Repr, Inhabited

structure Machine where
  time : Nat
  /-- the next sequence number (admissions, jobs) -/
  seq : Nat
  /-- by serial -/
  sessions : List Session
  pools : List PoolState
  /-- by (admission, job) -/
  residents : List Resident
  /-- (due, serial), in the order they started -/
  delays : List (Nat × Nat)
  /-- made ready by the last iteration's end -/
  ready : List Nat
  /-- in the order taken -/
  samples : List Sample
  halted : Bool
  /-- schedule ahead: the sessions whose run completed at the end of the last
  iteration, until the next one starts (step/iteration-end) -/
  finishing : List Nat := []
  /-- schedule ahead: those of them parked at the exit of their hold on the
  memory, in the order they parked (step/park), until it is formed (step/apply) -/
  parked : List Nat := []
  /-- schedule ahead: the sessions the last iteration gave a decode token (its
  id is not known yet, so its position is not cached yet: pool/preempt) -/
  decoded : List Nat := []
  deriving Repr, Inhabited

def Machine.session (m : Machine) (serial : Nat) : Session :=
  m.sessions.getD serial default

def Machine.putSession (m : Machine) (s : Session) : Machine :=
  { m with sessions := m.sessions.set s.serial s }

def Machine.pool (m : Machine) (q : Nat) : PoolState :=
  m.pools.getD q default

def Machine.putPool (m : Machine) (q : Nat) (ps : PoolState) : Machine :=
  { m with pools := m.pools.set q ps }

/-- The blocks allocated. -/
def heldBlocks : List Holder → Nat
  | [] => 0
  | h :: hs => h.blocks + heldBlocks hs

/-- The blocks cached. -/
def cachedBlocks : List Entry → Nat
  | [] => 0
  | e :: es => e.blocks + cachedBlocks es

/-- The blocks `units` take, rounded up. -/
def blocksFor (units block : Nat) : Nat :=
  (units + block - 1) / block

end SerqRef
