#!/bin/bash
# dtrace env validates the deterministic environment (dtrace(1), env): Tree and
# :0:0 rejected with the reason, Ring,CollnetDirect accepted, TRITON_CACHE_AUTOTUNING=1
# needs TRITON_CACHE_DIR, defaults filled when unset, an invalid value never exported.
. "$(dirname "$0")/lib.sh"
unset NCCL_ALGO NVTE_ALLOW_NONDETERMINISTIC_ALGO CUBLAS_WORKSPACE_CONFIG TRITON_CACHE_AUTOTUNING \
  TRITON_CACHE_DIR TRITON_PRINT_AUTOTUNING MAMBA_DETERMINISTIC CAUSAL_CONV1D_DETERMINISTIC NCCL_PROTO

# Unset: the defaults are in force and exported.
run_dtrace 0 env --check
# The verdict line, whole: "valid" alone is also in "INVALID" and "invalid:".
grep -qxF 'valid: a run started with `dtrace exec` gets the values above' "$OUT" ||
  fail "no line saying the environment is valid"
out_lacks "INVALID"
out_lacks "not deterministic"
run_dtrace 0 env --exports
[ "$(cat "$OUT")" = "export NCCL_ALGO=Ring
export NVTE_ALLOW_NONDETERMINISTIC_ALGO=0
export CUBLAS_WORKSPACE_CONFIG=:4096:8" ] || fail "exports with the defaults filled"
run_dtrace 0 env --json
json_is valid true
json_true '{v["name"]: (v["value"], v["state"]) for v in d["variables"]}["NCCL_ALGO"] == ("Ring", "default")'
json_is exports '{"NCCL_ALGO": "Ring", "NVTE_ALLOW_NONDETERMINISTIC_ALGO": "0", "CUBLAS_WORKSPACE_CONFIG": ":4096:8"}'
json_true '"NCCL_PROTO" in [a["name"] for a in d["advisories"]]'

# Tree is rejected, and --check says why.
NCCL_ALGO=Tree run_dtrace 1 env --check
out_has "NCCL_ALGO                         Tree         INVALID"
out_has "invalid: NCCL_ALGO=Tree, whose reduction order is not fixed"
NCCL_ALGO=Tree run_dtrace 0 env   # showing is not checking
NCCL_ALGO=Ring,Tree run_dtrace 1 env --check
out_has "which allows Tree"

# A subset of the fixed-order algorithms is accepted, and kept as set.
NCCL_ALGO=Ring,CollnetDirect run_dtrace 0 env --exports
out_has "export NCCL_ALGO=Ring,CollnetDirect"

CUBLAS_WORKSPACE_CONFIG=:0:0 run_dtrace 1 env --check
out_has "invalid: CUBLAS_WORKSPACE_CONFIG=:0:0, which is not a deterministic cuBLAS workspace"
CUBLAS_WORKSPACE_CONFIG=:16:8 run_dtrace 0 env --exports
out_has "export CUBLAS_WORKSPACE_CONFIG=:16:8"

TRITON_CACHE_AUTOTUNING=1 run_dtrace 1 env --check --json
json_is valid false
json_is exports null
json_true '[v["reason"] for v in d["variables"] if not v["valid"]][0].startswith("TRITON_CACHE_AUTOTUNING=1, which requires TRITON_CACHE_DIR")'
TRITON_CACHE_AUTOTUNING=1 TRITON_CACHE_DIR=/shared/triton run_dtrace 0 env --check
# Exports are quoted for the shell, so eval gives back the value as set.
TRITON_CACHE_AUTOTUNING=1 TRITON_CACHE_DIR="/shared dir/it's" run_dtrace 0 env --exports
[ "$(env -i sh -c "$(cat "$OUT")"'; printf %s "$TRITON_CACHE_DIR"')" = "/shared dir/it's" ] ||
  fail "exports do not survive the shell: $(cat "$OUT")"

# An invalid value is never exported: nothing on stdout, the reason on stderr.
NCCL_ALGO=Tree run_dtrace 1 env --exports
[ ! -s "$OUT" ] || fail "exports printed despite an invalid value"
err_has "dtrace: error: NCCL_ALGO=Tree, whose reduction order is not fixed"
echo ok
