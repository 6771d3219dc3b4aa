#!/usr/bin/env bash
# Bad flags, a missing corpus, an existing run directory, an unreadable or
# corrupt checkpoint: a clear error on stderr, exit 2, nothing overwritten.
. "$(dirname "$0")/minitrain-lib.sh"
# err_says TEXT: the last command's stderr has TEXT (a fixed string).
err_says() { grep -qF -- "$1" err.txt || fail "stderr lacks '$1': $(cat err.txt)"; }
expect_status 2 "$MINITRAIN" --no-such-flag --out x
err_says "The following argument was not expected: --no-such-flag"
expect_status 2 "$MINITRAIN" --steps ten --out x
err_says "Could not convert: --steps = ten"
expect_status 2 "$MINITRAIN" --level medium --out x
err_says "--level: medium not in {step,layer,kernel}"
expect_status 2 "$MINITRAIN" --nondet cosmic-rays --out x
err_says "--nondet: cosmic-rays not in {none,"
expect_status 2 "$MINITRAIN" --print-planted cosmic-rays
err_says "minitrain: error: --print-planted: cosmic-rays not in {none,"
expect_status 2 "$MINITRAIN" --print-planted none
err_says "minitrain: error: --print-planted: none plants nothing"
# Several plants: each name known, none twice, none beside none, no two at one op.
expect_status 2 "$MINITRAIN" --nondet splitk,cosmic-rays --out x
err_says "minitrain: error: --nondet: cosmic-rays not in {none,"
expect_status 2 "$MINITRAIN" --nondet splitk,atomic-bias-grad,splitk --out x
err_says "minitrain: error: --nondet splitk,atomic-bias-grad,splitk: splitk is given twice"
expect_status 2 "$MINITRAIN" --nondet splitk,,autotune --out x
err_says "minitrain: error: --nondet splitk,,autotune: an empty name"
expect_status 2 "$MINITRAIN" --nondet none,splitk --out x
err_says "minitrain: error: --nondet none,splitk: none plants nothing; it cannot go with other names"
expect_status 2 "$MINITRAIN" --nondet splitk,splitk-second-call --out x
err_says "splitk and splitk-second-call plant the same op (gemm_fc2 in fwd/layer.0/mlp) and cannot go together"
expect_status 2 "$MINITRAIN" --nondet splitk,allreduce-arrival --ranks 2 --out x
err_says "minitrain: error: --nondet allreduce-arrival needs --ranks 3 or more"
expect_status 2 "$MINITRAIN" --heads 3 --out x
err_says "minitrain: error: --d-model 64 is not a multiple of --heads 3"
expect_status 2 "$MINITRAIN" --nondet allreduce-arrival --ranks 2 --out x
err_says "minitrain: error: --nondet allreduce-arrival needs --ranks 3 or more"
expect_status 2 "$MINITRAIN" --steps 2
err_says "minitrain: error: --out DIR is required"
expect_status 2 "$MINITRAIN" --checkpoint-every 2 --out x
err_says "minitrain: error: --checkpoint-every needs --checkpoint-dir"
expect_status 2 "$MINITRAIN" --corpus "$WORK/missing.txt" --out x
err_says "minitrain: error: corpus $WORK/missing.txt: cannot open"
[ ! -e x ] || fail "a failed start left a run directory"

mt --steps 4 --checkpoint-every 2 --checkpoint-dir ck --out run
sum=$(md5sum run/rank0.jsonl)
expect_status 2 "$MINITRAIN" --steps 4 --out run
err_says "minitrain: error: run directory run exists; refusing to overwrite it"
[ "$sum" = "$(md5sum run/rank0.jsonl)" ] || fail "an existing run was overwritten"

expect_status 2 "$MINITRAIN" --steps 4 --resume --checkpoint-dir empty --out r1
err_says "minitrain: error: --resume: no checkpoint (ckpt-*.bin) in empty"
printf 'garbage' > ck/ckpt-00000002.bin
expect_status 2 "$MINITRAIN" --steps 4 --resume --checkpoint-dir ck --out r2
err_says "minitrain: error: checkpoint ck/ckpt-00000002.bin: not a minitrain checkpoint"
expect_status 2 "$MINITRAIN" --steps 4 --resume --checkpoint-dir ck --layers 3 --out r3
err_says "minitrain: error: checkpoint ck/ckpt-00000002.bin: not a minitrain checkpoint"
[ ! -e r2 ] && [ ! -e r3 ] || fail "a failed resume left a run directory"

DTRACE_REPLAY_STEP=abc expect_status 2 "$MINITRAIN" --steps 4 --out run
err_says "minitrain: error: DTRACE_REPLAY_STEP=abc: not a step number (an integer >= 0)"
NCCL_ALGO=Tree expect_status 2 "$MINITRAIN" --steps 1 --out det
err_says "minitrain: error: --deterministic-mode: the environment is not deterministic:"
err_says "  NCCL_ALGO=Tree, whose reduction order is not fixed"
NCCL_ALGO=Tree expect_status 0 "$MINITRAIN" --steps 1 --no-deterministic-mode --out nodet
[ "$(head -n1 nodet/rank0.jsonl | jq -r .env.NCCL_ALGO)" = Tree ] || fail "the header does not record NCCL_ALGO"
echo ok
