import Lake
open Lake DSL

/-! The Lean fragment of serQ (docs/lean.md): the syntax of the session
block, an executable semantics of one step engine on the step clock with LRU
pools in blocks, and the vLLM scheduler's recorded scenarios as theorems.
No dependency beyond Lean's core library. `lake build` compiles both
libraries; the oracle theorems are proved by `decide +kernel`. -/

package serqRef where

@[default_target]
lean_lib SerqRef where

@[default_target]
lean_lib SerqRefOracle where
