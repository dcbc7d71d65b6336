import SerqRef.Eval

/-!
# Pools

Eviction, the consumption of a session's own prefix, growth and release, on
one pool's state, in blocks: a pool's capacity is ⌊cap / block⌋ blocks, an
allocation of u units takes `blocksFor u` blocks, a cached prefix of c units
keeps ⌊c / block⌋. Mirrored in Python: `lean_bridge/mirror/pools.py`.
-/

namespace SerqRef

/-- pool/evict-block, pool/evict-entry: the least recently released entry
loses blocks from its tail, then the next, until `held + cached + need ≤ cap`
or nothing is cached. (Block by block from the front is this: an entry goes
whole while the excess is at least its size, and the first entry larger than
the excess loses exactly the excess.) -/
def evict (held need cap : Nat) : List Entry → List Entry
  | [] => []
  | e :: es =>
    let excess := held + e.blocks + cachedBlocks es + need - cap
    if excess = 0 then e :: es
    else if e.blocks ≤ excess then evict held need cap es
    else { e with blocks := e.blocks - excess } :: es

/-- pool/consume: the session takes at most `want` blocks of its own entry
(`none`: all of it); the rest stays, dead, where the entry was. -/
def consumeEntries (serial : Nat) (want : Option Nat) : List Entry → List Entry × Nat
  | [] => ([], 0)
  | e :: es =>
    if e.owner == some serial then
      let took :=
        match want with
        | none => e.blocks
        | some w => min e.blocks w
      let rest := e.blocks - took
      if rest = 0 then (es, took) else (({ owner := none, blocks := rest } : Entry) :: es, took)
    else
      match consumeEntries serial want es with
      | (restEntries, took) => (e :: restEntries, took)

/-- The allocation of the session's hold `hold`. -/
def findHolder (serial hold : Nat) : List Holder → Option Holder
  | [] => none
  | h :: hs => if h.serial == serial && h.hold == hold then some h else findHolder serial hold hs

/-- The session's innermost hold on `q`. -/
def innermostHold (s : Session) (q : Nat) : Option ActiveHold :=
  s.holds.find? (fun h => h.pools.contains q)

/-- The allocation of the session's innermost hold on `q`. -/
def innermostHolder (m : Machine) (serial q : Nat) : Option Holder :=
  match innermostHold (m.session serial) q with
  | none => none
  | some h => findHolder serial h.id (m.pool q).holders

/-- pool/grow: room is made for `need` more blocks, which the hold takes. -/
def growHolder (ps : PoolState) (pool : Pool) (serial hold need : Nat) : PoolState :=
  { ps with
    entries := evict (heldBlocks ps.holders) need pool.cap ps.entries,
    holders := ps.holders.map (fun h =>
      if h.serial == serial && h.hold == hold then { h with blocks := h.blocks + need } else h) }

/-- pool/release: the hold's allocation goes; `kept` blocks (when some)
become the session's entry, the newest, replacing its previous one. -/
def releaseUnits (ps : PoolState) (serial hold kept : Nat) : PoolState :=
  let holders := ps.holders.filter (fun h => !(h.serial == serial && h.hold == hold))
  if kept = 0 then { ps with holders := holders }
  else
    { ps with
      holders := holders,
      entries := ps.entries.filter (fun e => e.owner != some serial) ++ [({ owner := some serial, blocks := kept } : Entry)] }

/-- What a released allocation has computed: its position after a growing
run moved it or when preempted, else the whole allocation. -/
def computedUnits (pool : Pool) (a : Holder) (preempted : Bool) : Nat :=
  if preempted || a.advanced then a.position else a.blocks * pool.block

/-- min(cache, computed) units in whole blocks, and never more than the
allocation given back. -/
def keptBlocks (pool : Pool) (a : Holder) (want computed : Nat) : Nat :=
  min (min want computed / pool.block) a.blocks

end SerqRef
