"""The oracle harness: scenarios, the real-vLLM driver, the differential peer.

Not built yet: the recorded answers live in ``../shared/oracle`` and the
scenario tests arrive with the step engine (the next issue after the
small-step semantics).
"""
