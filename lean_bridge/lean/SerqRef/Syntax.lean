/-!
# The session block's syntax (the Lean fragment of serQ)

The fragment of serQ's IR (version 13) that the executable semantics of this
library covers: explicit sessions; pools with a capacity in blocks, LRU
eviction, fifo queues admitted by the one step engine, `preempt lifo` on the
engine's memory; one step engine of cost 1 (the step clock) serving by keys;
delay stages; `set`, `observe`, `turn`, `hold` (units, reserve, reuse,
cache), `run` on the engine (prefill or decode, `growing`) or on a delay,
`branch` on a test, `end`. Values are natural numbers.

As in the IR, the blocks are an arena: a statement names a nested block by
its index, so `Stmt` is an ordinary inductive type.

Mirrored in Python, definition for definition: `lean_bridge/syntax.py`.
-/

namespace SerqRef

/-- The context variables the fragment reads. -/
inductive Ctx where
  /-- the clock, in steps -/
  | now
  /-- the engine's residents when its iteration starts (budget, chunk, serve keys) -/
  | residents
  /-- the decoding residents when the iteration starts -/
  | decoders
  /-- a serve key: 1 for a decoding resident -/
  | decoding
  /-- a serve key: the resident's session's latest admission number -/
  | admission
  /-- a serve key: the tokens the resident's run has left -/
  | remaining
  deriving Repr, DecidableEq, Inhabited

/-- Expressions, on ℕ: `sub` is truncated, `div` is the floor (`n / 0 = 0`);
comparisons, `and`, `or` and `not` give 1 or 0 and take a non-zero operand
as true. -/
inductive Expr where
  | num (n : Nat)
  | attr (slot : Nat)
  | ctx (c : Ctx)
  /-- the sessions waiting in a pool's queue -/
  | queued (pool : Nat)
  /-- the session's own cached prefix in a pool, in units -/
  | cachedIn (pool : Nat)
  /-- the holders of a pool (its allocations: a hold's header, read at admission) -/
  | holders (pool : Nat)
  /-- the engine's budget left (a hold's header, read at the engine's admission) -/
  | budgetLeft
  | add (a b : Expr)
  | sub (a b : Expr)
  | mul (a b : Expr)
  | div (a b : Expr)
  | min (a b : Expr)
  | max (a b : Expr)
  | lt (a b : Expr)
  | le (a b : Expr)
  | gt (a b : Expr)
  | ge (a b : Expr)
  | eq (a b : Expr)
  | ne (a b : Expr)
  | and (a b : Expr)
  | or (a b : Expr)
  | not (a : Expr)
  | cond (c a b : Expr)
  deriving Repr, Inhabited

/-- What a run on the engine does: compute a prompt, or decode. -/
inductive Mode where
  | prefill
  | decode
  deriving Repr, DecidableEq, Inhabited

/-- One pool of a hold: its units and its reserve (`hold POOL (units) reserve (r)`). -/
structure Use where
  pool : Nat
  units : Expr
  reserve : Option Expr
  deriving Repr, Inhabited

/-- Statements. -/
inductive Stmt where
  | set (slot : Nat) (e : Expr)
  | observe (index : Nat) (e : Expr)
  | turn
  /-- `hold P (u) reserve (r), … reuse (ρ) { body } cache (ℓ)` -/
  | hold (uses : List Use) (reuse : Option Expr) (body : Nat) (cache : Option Expr)
  /-- `run ENGINE mode (work) [growing POOL]` -/
  | step (mode : Mode) (work : Expr) (growing : Option Nat)
  /-- `run D (work)` on a delay stage: every job alone at rate 1 -/
  | delay (stage : Nat) (work : Expr)
  | branch (guard : Expr) (thenBlock elseBlock : Nat)
  /-- `end;` -/
  | finish
  deriving Repr, Inhabited

/-- The direction of a key (the engine's serve keys, a pool's queue and victim
keys): `-e` in serQ is `e` descending. -/
inductive Order where
  | asc
  | desc
  deriving Repr, DecidableEq, Inhabited

structure ServeKey where
  order : Order
  key : Expr
  deriving Repr, Inhabited

/-- A pool: its capacity in blocks, the units of a block (1 without a block
size), whether it preempts (`preempt lifo` or `preempt by`), whether the
engine admits its queue (`admit via`). -/
structure Pool where
  cap : Nat
  block : Nat
  lifo : Bool
  viaEngine : Bool
  /-- serq-ref: `queue by` keys (empty: fifo) -/
  queue : List ServeKey := []
  /-- serq-ref: `requeue by key` (a preempted hold joins the queue as any hold; else at its head) -/
  requeueKey : Bool := false
  /-- serq-ref: `preempt by` keys (empty: lifo, the last admitted) -/
  victim : List ServeKey := []
  deriving Repr

instance : Inhabited Pool := ⟨{ cap := 0, block := 1, lifo := false, viaEngine := false }⟩

/-- What a pass does after a grower preempted itself (it was the last
admitted holder of the memory pool): it `ends` (seed 001/002, vLLM 0c87a197:
`if new_blocks is None: break`) or `continues` with the next resident in
serving order, admitting nothing (vLLM 0.33.0's priority path; serQ's
`self preemption continue;`). -/
inductive SelfPreemption where
  | ends
  | continues
  deriving Repr, DecidableEq, Inhabited

/-- The one step engine: iterations of cost 1, its budget and chunk (0: no
cap), its serve order (keys, then admission order), its memory pool, its
self-preemption rule, and whether it schedules ahead (`schedule ahead`, vLLM
0.33.0's asynchronous scheduling: the next iteration is formed before the
ended one's finished requests exit; docs/design/async-scheduling.md). -/
structure Engine where
  budget : Expr
  chunk : Expr
  serve : List ServeKey
  memory : Nat
  selfPreemption : SelfPreemption
  ahead : Bool := false
  deriving Repr, Inhabited

/-- An explicit session: attributes that overwrite init's, and one list of
(slot, value) per turn. -/
structure Spec where
  attrs : List (Nat × Nat)
  turns : List (List (Nat × Nat))
  deriving Repr, Inhabited

/-- The built-in attributes' slots. -/
structure Slots where
  cached : Nat
  serial : Nat
  turnNo : Nat
  more : Nat
  computed : Nat
  deriving Repr, Inhabited

structure Program where
  attrCount : Nat
  slots : Slots
  pools : List Pool
  engine : Engine
  blocks : List (List Stmt)
  init : Nat
  turn : Nat
  session : Nat
  sessions : List Spec
  deriving Repr, Inhabited

/-- The statement at (block, index), or `none` past the block's end. -/
def Program.stmtAt (p : Program) (block index : Nat) : Option Stmt :=
  (p.blocks.getD block [])[index]?

def Program.pool (p : Program) (q : Nat) : Pool :=
  p.pools.getD q default

/-- More steps than a session can take at one instant: the fragment has no
loop, so each statement and each block's end runs at most once. -/
def Program.fuel (p : Program) : Nat :=
  2 * ((p.blocks.map List.length).foldl (· + ·) 0 + p.blocks.length) + 4

/-- More turns than one iteration can take (a resident is scheduled, grows a
turn per victim, or a hold is admitted). -/
def Program.serveFuel (p : Program) : Nat :=
  (p.sessions.length + 1) * (p.sessions.length + 2) * p.fuel

end SerqRef
