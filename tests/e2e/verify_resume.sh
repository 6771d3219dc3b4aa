#!/usr/bin/env bash
# verify --resume-at K: an uninterrupted arm, one stopped at K and one resumed
# from its checkpoint agree (certified); a resume that forgets the RNG state
# (--nondet resume-rng) diverges at K; a workload ignoring DTRACE_STOP_AT or
# DTRACE_RESUME_AT is trouble, named.
. "$(dirname "$0")/minitrain-lib.sh"
expect_status 0 "$DTRACE" verify --json --resume-at 2 -- "$MINITRAIN" --steps 4 --ranks 2 --out mine
jq -e '.certified and .guarantee == "checkpoint-resume" and .resume_at == 2' out.txt >/dev/null ||
  fail "not certified: $(jq -c '{certified, guarantee, resume_at}' out.txt)"
jq -e '.compared.steps == [0, 3] and .compared.step_count == 4 and .compared.ranks == 2' out.txt >/dev/null ||
  fail "compared: $(jq -c .compared out.txt)"
[ "$(jq -c '[.workload.comparisons[] | [.a, .b, .compared.steps]]' out.txt)" = \
  '[["full","stopped",[0,1]],["full","resumed",[2,3]]]' ] || fail "comparisons: $(jq -c .workload.comparisons out.txt)"

expect_status 1 "$DTRACE" verify --json --keep kept --resume-at 2 -- "$MINITRAIN" --steps 4 --nondet resume-rng --out mine
[ "$(jq -r '.first.step, (.first.arms | join(" ")), .first.name' out.txt | paste -sd' ')" = \
  "2 full resumed dropout_rng" ] || fail "resume-rng: $(jq -c .first out.txt)"
# The kept arms are ordinary runs: the stopped arm's checkpoint is there, the
# resumed arm's replay argv restores the way it ran, and bisect finds the restore.
[ -f kept/checkpoints/stop-resume/ckpt-00000002.bin ] || fail "no checkpoint: $(ls -R kept/checkpoints)"
replay_argv kept/resumed | grep -x -- --resume-step >/dev/null || fail "resumed arm's replay argv lacks --resume-step"
expect_status 1 "$DTRACE" diff kept/full kept/resumed
expect_status 0 "$DTRACE" bisect --trust --json
[ "$(jq -r .verdict out.txt)" = restore ] || fail "bisect of the kept arms: $(jq -c '{verdict, reached}' out.txt)"

expect_status 2 "$DTRACE" verify --resume-at 2 -- env -u DTRACE_STOP_AT "$MINITRAIN" --steps 4 --out mine
grep -q "does not honour DTRACE_STOP_AT=2" err.txt || fail "ignored stop: $(cat err.txt)"
expect_status 2 "$DTRACE" verify --resume-at 2 -- env -u DTRACE_RESUME_AT "$MINITRAIN" --steps 4 --out mine
grep -q "does not honour DTRACE_RESUME_AT=2" err.txt || fail "ignored resume: $(cat err.txt)"
echo ok
