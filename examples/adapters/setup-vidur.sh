#!/usr/bin/env bash
# Bring Vidur (github microsoft/vidur) and build the virtual environment in
# which its replica schedulers answer the conformance corpus through
# examples/adapters/vidur_adapter.py (docs/field.md).
#
#     bash examples/adapters/setup-vidur.sh [SRC [VENV]]
#         SRC:  Vidur's source tree (default: $SERQ_VIDUR_SRC, else ../vidur-src beside the repo)
#         VENV: its venv (default: $SERQ_VIDUR_VENV, else ../vidur-env beside the repo)
#
# It needs: git and the network to GitHub for the clone (when SRC is not
# there yet; with no network, put a checkout of microsoft/vidur there by
# other means: the adapter reads only its vidur/ package, not its data/
# profiles, which are large files the adapter does not use), and PyPI for
# Vidur's requirements.txt. Vidur has no release: the grading in
# docs/field.md is of the commit this script prints (VIDUR_COMMIT below, the
# repository's head when it was graded). Idempotent: a source tree at that
# commit and a venv that imports Vidur's schedulers are left as they are.
# Both are kept OUT of the repository; nothing in CI or the default tests
# needs them. Afterwards:
#     export SERQ_VIDUR_PYTHON=VENV/bin/python SERQ_VIDUR_SRC=SRC
#
# Exit codes: 0 ready; 1 built but Vidur does not answer the check scenario;
# 3 no source (none at SRC and GitHub unreachable); 4 pip failed.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
src="${1:-${SERQ_VIDUR_SRC:-$repo/../vidur-src}}"
venv="${2:-${SERQ_VIDUR_VENV:-$repo/../vidur-env}}"
python="${PYTHON:-python3}"
VIDUR_COMMIT=7d47513
VIDUR_URL=https://github.com/microsoft/vidur

if [ ! -d "$src/vidur" ]; then
  if ! git clone --quiet --filter=blob:limit=1m "$VIDUR_URL" "$src" || ! git -C "$src" checkout --quiet "$VIDUR_COMMIT"; then
    echo "error: no Vidur source in $src, and $VIDUR_URL could not be cloned (or has no commit $VIDUR_COMMIT)." >&2
    echo "       Put a checkout of microsoft/vidur at $VIDUR_COMMIT there by other means (its vidur/ package and" >&2
    echo "       requirements.txt are all this script and the adapter read), or give its path as SRC, and run again." >&2
    exit 3
  fi
fi
if [ ! -f "$src/requirements.txt" ]; then
  echo "error: $src has a vidur/ package but no requirements.txt: it is not a checkout of microsoft/vidur" >&2
  exit 3
fi
src="$(cd "$src" && pwd)"
if [ -d "$src/.git" ]; then
  head="$(git -C "$src" rev-parse --short=7 HEAD)"
  [ "$head" = "$VIDUR_COMMIT" ] || echo "warning: $src is at $head, not $VIDUR_COMMIT (the commit docs/field.md graded)" >&2
fi

check() {
  [ -x "$venv/bin/python" ] || return 1
  SERQ_VIDUR_SRC="$src" "$venv/bin/python" "$here/vidur_adapter.py" sarathi "$repo/oracle/data/shared/vllm/chunked.json" \
    2>/dev/null | grep -q '"first": {"0": 3, "1": 4, "2": 4}'
}

if ! check; then
  [ -x "$venv/bin/python" ] || "$python" -m venv "$venv"
  if ! "$venv/bin/python" -m pip install -q -r "$src/requirements.txt"; then
    echo "error: pip could not install Vidur's requirements ($src/requirements.txt) into $venv:" >&2
    echo "       it needs PyPI (or a mirror pip is configured for) for numpy, pandas, scikit-learn, wandb," >&2
    echo "       kaleido, ddsketch, plotly_express, matplotlib, seaborn and fasteners" >&2
    exit 4
  fi
fi
if ! check; then
  echo "error: $venv was built but Vidur's sarathi scheduler does not answer oracle/data/shared/vllm/chunked.json;" >&2
  echo "       run: SERQ_VIDUR_SRC=$src $venv/bin/python examples/adapters/vidur_adapter.py sarathi oracle/data/shared/vllm/chunked.json" >&2
  exit 1
fi
echo "Vidur ($VIDUR_COMMIT) is ready: its source in $src, its venv $venv"
echo "export SERQ_VIDUR_PYTHON=$venv/bin/python SERQ_VIDUR_SRC=$src"
