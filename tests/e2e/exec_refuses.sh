#!/bin/bash
# dtrace exec runs CMD with the defaults filled and CMD's exit status; a set but
# invalid value is refused (125) without running CMD; a CMD that cannot run is
# 126, one that is not found 127.
. "$(dirname "$0")/lib.sh"
unset NCCL_ALGO NVTE_ALLOW_NONDETERMINISTIC_ALGO CUBLAS_WORKSPACE_CONFIG TRITON_CACHE_AUTOTUNING \
  TRITON_CACHE_DIR TRITON_PRINT_AUTOTUNING MAMBA_DETERMINISTIC CAUSAL_CONV1D_DETERMINISTIC

run_dtrace 0 exec -- env
out_has "NCCL_ALGO=Ring"
out_has "NVTE_ALLOW_NONDETERMINISTIC_ALGO=0"
out_has "CUBLAS_WORKSPACE_CONFIG=:4096:8"
CUBLAS_WORKSPACE_CONFIG=:16:8 run_dtrace 0 exec -- env
out_has "CUBLAS_WORKSPACE_CONFIG=:16:8"       # a valid value set is kept
run_dtrace 3 exec -- sh -c 'exit 3'          # CMD's status passes through

NCCL_ALGO=Tree run_dtrace 125 exec -- touch "$WORK/ran"
[ ! -e "$WORK/ran" ] || fail "exec ran the command despite NCCL_ALGO=Tree"
err_has "dtrace: error: NCCL_ALGO=Tree, whose reduction order is not fixed"
err_has "not running touch"
TRITON_CACHE_AUTOTUNING=1 run_dtrace 125 exec -- touch "$WORK/ran"
[ ! -e "$WORK/ran" ] || fail "exec ran the command despite TRITON_CACHE_AUTOTUNING=1 alone"

run_dtrace 127 exec -- "$WORK/no-such-command"
err_has "cannot run"

# A command that exists but cannot be run: env(1)'s 126, with the reason.
# (No execute bit stops root too: execve wants at least one.)
printf '#!/bin/sh\ntouch "%s/ran"\n' "$WORK" >"$WORK/not-executable"
chmod 644 "$WORK/not-executable"
run_dtrace 126 exec -- "$WORK/not-executable"
trouble_is "cannot run $WORK/not-executable: Permission denied"
[ ! -e "$WORK/ran" ] || fail "exec ran a command without an execute bit"
run_dtrace 126 exec -- "$WORK"
trouble_is "cannot run $WORK: Permission denied"
echo ok
