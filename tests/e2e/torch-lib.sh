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
