# Shared by the PyTorch end-to-end tests (sourced): lib.sh's assertions plus the
# example workload tools/torch/gpt_moe.py run by Debian's python3 with the
# dtrace_torch package of the build tree (PYTHONPATH=build/python, the one
# variable docs/torch.md names). Skips (status 77) when that python has no torch.
. "$(dirname "$0")/lib.sh"
: "${SOURCE_ROOT:?}" "${BUILD_ROOT:?}"
PYTHON=${TORCH_PYTHON:-/usr/bin/python3}
if ! "$PYTHON" -c 'import torch' 2>/dev/null; then
  echo "SKIP: $PYTHON cannot import torch (tools/setup-deps.sh installs Debian's python3-torch)"
  exit 77
fi
export PYTHONPATH="$BUILD_ROOT/python"
EXAMPLE="$SOURCE_ROOT/tools/torch/gpt_moe.py"

# ex ARGS...: the example, quiet on success.
ex() { "$PYTHON" "$EXAMPLE" "$@" >/dev/null 2>"$WORK/example.err" || { cat "$WORK/example.err" >&2; fail "gpt_moe.py $*"; }; }
