"""The oracle harness: scenarios, the real-vLLM driver, the differential peer.

``peer``: pyserq (the serQ reference implementation) run on our IR, for the
differential tests and the speed benchmark.

``real``: the real vLLM 0.33.0 scheduler, run as a subprocess in its own
environment (``real/driver.py``, built by ``real/setup-vllm.sh``; nothing in
the package imports vllm). ``record``: records its answers under ``data/``
with a manifest. ``campaign_cases``: the seeded random cases of the campaign.
``scenario``, ``replay``, ``check``: serq-ref's side (lib/vllm.sq's engine on
the step clock). ``campaign``: both sides on random cases, each divergence
with its first differing step and a minimal case. ``cli``: ``serq-ref
oracle`` (docs/oracle.md).
"""
