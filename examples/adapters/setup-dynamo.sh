#!/usr/bin/env bash
# Build the virtual environment in which NVIDIA Dynamo's mocker (PyPI
# ai-dynamo-runtime 1.6.1) answers the conformance corpus through
# examples/adapters/dynamo_adapter.py (docs/field.md).
#
#     bash examples/adapters/setup-dynamo.sh [VENV]   (default: $SERQ_DYNAMO_VENV,
#                                                     else ../dynamo-env beside the repo)
#
# About 75 MB downloaded (the runtime wheel; its native module is 226 MB on
# disk). Idempotent: a venv whose mocker replays a one-request trace is left
# as it is. The venv is kept OUT of the repository; nothing in CI or the
# default tests needs it. Afterwards:  export SERQ_DYNAMO_PYTHON=VENV/bin/python
#
# What it installs, and why not more: the mocker's offline replay
# (dynamo._core.run_mocker_trace_replay) is in ai-dynamo-runtime. The
# `ai-dynamo` package itself (the Python side: dynamo.mocker's CLI, the
# planner, the frontends) depends on `aisimulate`, whose PyPI entry is a stub
# that downloads the real wheel from NVIDIA's own index at install time; this
# machine reaches PyPI only, so `pip install ai-dynamo==1.6.1` fails there
# ("Preparing metadata ... did not run successfully", the stub's URLError).
# The adapter needs none of it: ai-dynamo is installed without its
# dependencies, for its version and its mocker's config defaults only.
#
# Exit codes: 0 ready; 1 built but its mocker does not replay the check
# trace; 4 pip failed.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
venv="${1:-${SERQ_DYNAMO_VENV:-$repo/../dynamo-env}}"
mkdir -p "$(dirname "$venv")"
venv="$(cd "$(dirname "$venv")" && pwd)/$(basename "$venv")"
python="${PYTHON:-python3}"
DYNAMO_VERSION=1.6.1

check() {
  [ -x "$venv/bin/python" ] || return 1
  "$venv/bin/python" - <<PY >/dev/null 2>&1
import importlib.metadata as m, json, os, tempfile
assert m.version("ai-dynamo-runtime") == "$DYNAMO_VERSION", m.version("ai-dynamo-runtime")
import dynamo._core as core
with tempfile.TemporaryDirectory() as d:
    trace = os.path.join(d, "t.jsonl")
    open(trace, "w").write(json.dumps({"timestamp": 0, "input_length": 20, "output_length": 2, "hash_ids": [1, 2]}) + "\n")
    engine = {"block_size": 16, "num_gpu_blocks": 8, "max_num_seqs": 2, "max_num_batched_tokens": 32,
              "timing_model": {"type": "fixed", "prefill_ms": 1.0, "decode_ms": 1.0}}
    r = core.run_mocker_trace_replay([trace], extra_engine_args={"engine": engine, "num_gpu_blocks_is_explicit": True},
                                     trace_block_size=16, capture_per_request=True)
    (record,) = r.per_request
    assert (record["first_token_ms"], record["last_token_ms"]) == (1.0, 2.0), record
PY
}

if check; then
  echo "Dynamo's mocker $DYNAMO_VERSION is ready in $venv"
  echo "export SERQ_DYNAMO_PYTHON=$venv/bin/python"
  exit 0
fi

[ -x "$venv/bin/python" ] || "$python" -m venv "$venv"
pip=("$venv/bin/python" -m pip install -q)
if ! "${pip[@]}" "ai-dynamo-runtime==$DYNAMO_VERSION"; then
  echo "error: pip could not install ai-dynamo-runtime==$DYNAMO_VERSION into $venv: it needs PyPI (or a mirror" >&2
  echo "       pip is configured for), Python >= 3.10 and a glibc 2.28 Linux (its wheel is cp310-abi3-manylinux_2_28)" >&2
  exit 4
fi
if ! "${pip[@]}" --no-deps "ai-dynamo==$DYNAMO_VERSION"; then
  echo "error: pip could not install ai-dynamo==$DYNAMO_VERSION (without its dependencies) into $venv" >&2
  exit 4
fi

if ! check; then
  echo "error: $venv was built but its mocker does not replay a one-request trace;" >&2
  echo "       run: $venv/bin/python -c 'import dynamo._core'" >&2
  exit 1
fi
echo "Dynamo's mocker $DYNAMO_VERSION is ready in $venv"
echo "export SERQ_DYNAMO_PYTHON=$venv/bin/python"
