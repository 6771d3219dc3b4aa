# Shared by the PyTorch end-to-end tests (sourced): lib.sh's assertions plus the
# example workload tools/torch/gpt_moe.py run by Debian's python3 with the
# dtrace_torch package of the build tree (PYTHONPATH=build/python, the one
# variable docs/torch.md names). TORCH_PYTHON names another python: tools/test.sh
# runs the suite again with the Debian 13 root's (torch 2.x, tools/setup-torch2.sh).
# Skips (status 77) when that python has no torch, and fails under CI (lib.sh's skip).
. "$(dirname "$0")/python-lib.sh"
need_python_module torch "tools/setup-deps.sh installs Debian's python3-torch"
EXAMPLE="$SOURCE_ROOT/tools/torch/gpt_moe.py"

# free_port: a port the system picks for one launch's MASTER_PORT (as torchrun
# picks its own), never a random one that another test's ranks may hold.
free_port() {
  "$PYTHON" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# torchrun N: the torchrun line (docs/torch.md) for N ranks on this host. Its
# rendezvous store listens on a port the system picks (localhost:0), never
# --standalone's: torch 1.13's --standalone is port 29400 on every launch, so two
# tests' torchruns running at once met in one store and broke each other's
# rendezvous ("Connection reset by peer", an abort).
torchrun() {
  echo "$PYTHON -m torch.distributed.run --rdzv_backend c10d --rdzv_endpoint localhost:0 --rdzv_id dtrace --nnodes 1 --nproc_per_node $1 --redirects 9:0 --tee 9:0 --no_python"
}

# ex ARGS...: the example, quiet on success.
ex() { "$PYTHON" "$EXAMPLE" "$@" >/dev/null 2>"$WORK/example.err" || { cat "$WORK/example.err" >&2; fail "gpt_moe.py $*"; }; }

# A test of torch.compile starts here. On a torch without it (1.13) the
# program given must refuse its switch, saying MESSAGE, and the test skips
# (status 77, under CI too: tools/test.sh's torch 2.x pass is the one that runs
# it, and fails when it cannot). Then inductor's compile cache goes in the
# test's directory: the first run compiles, the replays (which inherit it)
# find the kernels there; nothing goes to /tmp.
#   needs_compile MESSAGE PROGRAM ARGS...
needs_compile() {
  local message=$1
  shift
  if ! "$PYTHON" -c 'import sys, torch; sys.exit(not hasattr(torch, "compile"))'; then
    "$PYTHON" "$@" 2>"$ERR" && fail "$* ran on a torch without torch.compile"
    err_has "$message"
    echo "SKIP: torch $("$PYTHON" -c 'import torch; print(torch.__version__)') has no torch.compile"
    exit 77
  fi
  export TORCHINDUCTOR_CACHE_DIR=$WORK/inductor
}
