"""The oracle harness: scenarios, the real-vLLM driver, the differential peer.

``peer``: pyserq (the serQ reference implementation) run on our IR, for the
differential tests and the speed benchmark. The scenario tests against the
recorded vLLM answers (``../shared/oracle``) and the driver of the real
scheduler arrive with the step engine (docs/design/step-engine.md, §5).
"""
