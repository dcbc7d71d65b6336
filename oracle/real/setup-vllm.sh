#!/usr/bin/env bash
# Build the virtual environment in which the real vLLM 0.33.0 scheduler runs
# on a CPU (no GPU, no model): ../shared/oracle/VLLM-DRIVER.md, "Install".
#
#     bash oracle/real/setup-vllm.sh [VENV]      (default: $SERQ_VLLM_VENV,
#                                                 else ../vllm-env beside the repo)
#
# 3.1 GB; about 100 s of CPU the first time (the wall clock is the network's and the load's: 124 s
# idle with pip's cache, 556 s at a load of 6-17 without it; README.md). Idempotent: a venv that already
# imports vllm 0.33.0 and the scheduler chain is left as it is. The venv is
# kept OUT of the repository; nothing in CI or the default tests needs it.
# Afterwards point serq-ref at it:  export SERQ_VLLM_PYTHON=VENV/bin/python
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
venv="${1:-${SERQ_VLLM_VENV:-$repo/../vllm-env}}"
mkdir -p "$(dirname "$venv")"
venv="$(cd "$(dirname "$venv")" && pwd)/$(basename "$venv")"
python="${PYTHON:-python3}"

VLLM_VERSION=0.33.0
# A CPU build: a plain `torch` (or vllm's own pin, 2.14.0) pulls a multi-GB
# CUDA build. vllm's scheduler path does not care which torch it gets.
TORCH_VERSION=2.13.0
# The scheduler's import chain, with vllm 0.33.0's own version ranges.
DEPS=(
  packaging numpy "pydantic>=2.12.0" regex cbor2 psutil "pyzmq>=25.0.0" urllib3
  "transformers>=5.16.1,<5.21.0" "aiohttp>=3.14.4" "requests>=2.33.0"
  openai-harmony "openai>=2.25.0" msgspec cloudpickle "pillow>=13.0.0"
  pybase64 cachetools uvloop py-cpuinfo "prometheus_client>=0.18.0"
  "xgrammar==0.2.8" "fastapi>=0.133.0,<0.137.0" partial-json-parser
  "llguidance>=1.7.0,<1.8.0" einops
)

check() {
  [ -x "$venv/bin/python" ] || return 1
  HF_HUB_OFFLINE=1 VLLM_CACHE_ROOT="$(mktemp -d)" "$venv/bin/python" - <<EOF >/dev/null 2>&1
import importlib.metadata as m
assert m.version("vllm") == "$VLLM_VERSION", m.version("vllm")
from vllm.v1.core.sched.scheduler import Scheduler
from vllm.v1.structured_output import StructuredOutputManager
from vllm.v1.core.kv_cache_utils import get_request_block_hasher
EOF
}

if check; then
  echo "vLLM $VLLM_VERSION is ready in $venv"
  echo "export SERQ_VLLM_PYTHON=$venv/bin/python"
  exit 0
fi

[ -x "$venv/bin/python" ] || "$python" -m venv "$venv"
pip=("$venv/bin/python" -m pip install -q)
"${pip[@]}" "torch==$TORCH_VERSION"
"${pip[@]}" --no-deps "vllm==$VLLM_VERSION"
# vllm itself went in with --no-deps, and DEPS is only its scheduler's import chain: pip's resolver would
# end this step with "ERROR: pip's dependency resolver does not currently take into account ..." and about
# 45 lines of "vllm 0.33.0 requires X, which is not installed" (ray, the GPU kernels, torch 2.14.0, ...),
# none of which the scheduler imports. --no-warn-conflicts leaves them out; check() below is the test
# that counts, and it fails loudly if the scheduler does not import.
echo "installing the scheduler's dependencies only (not vllm's serving stack: pip is told not to list what it lacks)"
"${pip[@]}" --no-warn-conflicts "${DEPS[@]}" "torch==$TORCH_VERSION"

if ! check; then
  echo "error: $venv was built but does not import vLLM $VLLM_VERSION's scheduler;" >&2
  echo "       run: HF_HUB_OFFLINE=1 $venv/bin/python -c 'import vllm.v1.core.sched.scheduler'" >&2
  exit 1
fi
echo "vLLM $VLLM_VERSION is ready in $venv"
echo "export SERQ_VLLM_PYTHON=$venv/bin/python"
