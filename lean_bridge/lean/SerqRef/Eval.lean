import SerqRef.State

/-!
# Expressions

`eval` on ℕ, the environments it reads, and the two readings of the engine's
budget: `want` (what a resident would take) and `plan` (budget_left read
outside the engine's admission). Mirrored in Python: `lean_bridge/mirror/expr.py`.
-/

namespace SerqRef

/-- What an expression reads besides the machine. -/
structure Env where
  attrs : List Nat
  serial : Nat
  time : Nat
  residents : Nat
  decoders : Nat
  decoding : Nat
  admission : Nat
  remaining : Nat
  budgetLeft : Nat
  deriving Repr, Inhabited

/-- The blocks of the session's own cache entry (0 without one). -/
def ownBlocks (serial : Nat) : List Entry → Nat
  | [] => 0
  | e :: es => if e.owner == some serial then e.blocks else ownBlocks serial es

def eval (p : Program) (m : Machine) (v : Env) : Expr → Nat
  | .num n => n
  | .attr k => v.attrs.getD k 0
  | .ctx c =>
    match c with
    | .now => v.time
    | .residents => v.residents
    | .decoders => v.decoders
    | .decoding => v.decoding
    | .admission => v.admission
    | .remaining => v.remaining
  | .queued q => (m.pool q).queue.length
  | .cachedIn q => ownBlocks v.serial (m.pool q).entries * (p.pool q).block
  | .holders q => (m.pool q).holders.length
  | .budgetLeft => v.budgetLeft
  | .add a b => eval p m v a + eval p m v b
  | .sub a b => eval p m v a - eval p m v b
  | .mul a b => eval p m v a * eval p m v b
  | .div a b => eval p m v a / eval p m v b
  | .min a b => min (eval p m v a) (eval p m v b)
  | .max a b => max (eval p m v a) (eval p m v b)
  | .lt a b => if eval p m v a < eval p m v b then 1 else 0
  | .le a b => if eval p m v a ≤ eval p m v b then 1 else 0
  | .gt a b => if eval p m v a > eval p m v b then 1 else 0
  | .ge a b => if eval p m v a ≥ eval p m v b then 1 else 0
  | .eq a b => if eval p m v a = eval p m v b then 1 else 0
  | .ne a b => if eval p m v a ≠ eval p m v b then 1 else 0
  | .and a b => if eval p m v a ≠ 0 then (if eval p m v b ≠ 0 then 1 else 0) else 0
  | .or a b => if eval p m v a ≠ 0 then 1 else (if eval p m v b ≠ 0 then 1 else 0)
  | .not a => if eval p m v a = 0 then 1 else 0
  | .cond c a b => if eval p m v c ≠ 0 then eval p m v a else eval p m v b

def countDecoders (rs : List Resident) : Nat :=
  (rs.filter (fun r => r.mode == .decode)).length

/-- What a session's statements and hold headers read. -/
def Machine.envWith (m : Machine) (attrs : List Nat) (serial budgetLeft : Nat) : Env :=
  { attrs := attrs, serial := serial, time := m.time, residents := m.residents.length,
    decoders := countDecoders m.residents, decoding := 0, admission := 0, remaining := 0,
    budgetLeft := budgetLeft }

def Machine.envOf (m : Machine) (s : Session) (budgetLeft : Nat) : Env :=
  m.envWith s.attrs s.serial budgetLeft

/-- What the budget and the chunk read, before an iteration; a parked
session (schedule ahead) counts among the residents, as vLLM's finished
request is still running until its batch's output is applied
(get_request_counts, vllm/v1/core/sched/scheduler.py:756-758, 2920-2922). -/
def Machine.engineEnv (m : Machine) : Env :=
  { attrs := [], serial := 0, time := m.time, residents := m.residents.length + m.parked.length,
    decoders := countDecoders m.residents, decoding := 0, admission := 0, remaining := 0, budgetLeft := 0 }

/-- A decode takes one token, a prefill up to the chunk (0: no cap). -/
def want (chunk : Nat) (r : Resident) : Nat :=
  match r.mode with
  | .decode => min 1 r.remaining
  | .prefill => if chunk = 0 then r.remaining else min r.remaining chunk

def sumWant (chunk : Nat) : List Resident → Nat
  | [] => 0
  | r :: rs => want chunk r + sumWant chunk rs

/-- budget_left read outside the engine's admission (a hold's header when it
joins its queue): the budget the residents leave. -/
def plan (p : Program) (m : Machine) : Nat :=
  let v := m.engineEnv
  eval p m v p.engine.budget - sumWant (eval p m v p.engine.chunk) m.residents

end SerqRef
