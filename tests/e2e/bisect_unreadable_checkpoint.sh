#!/usr/bin/env bash
# A one-process job whose replay cannot read its checkpoint (minitrain: "not a
# minitrain checkpoint") fails bisect with exit 2, and the error shows the
# rank's own stderr, labelled as the rank's: the replay command is that rank's
# process, not a launcher (dtrace(1), bisect). Sessions and launches alike.
here=$(cd "$(dirname "$0")" && pwd)
. "$here/bisect-lib.sh"

mt --steps 4 --level step --nondet splitk --chaos-seed 1 --checkpoint-every 2 --checkpoint-dir ck-a --out a
mt --steps 4 --level step --nondet splitk --chaos-seed 2 --checkpoint-every 2 --checkpoint-dir ck-b --out b
printf 'garbage' > ck-a/ckpt-00000002.bin
for way in "" --launches; do
  run_dtrace 2 bisect --trust --step 3 --rank 0 $way a b
  err_has "replay of run A (layer) failed"
  grep "^dtrace: error: " "$ERR" | grep -Eq "(exit|exited with status) 2; " || fail "${way:-sessions}: no exit status: $(cat "$ERR")"
  grep -Eq "(its stderr|rank 0's stderr \(the replay command's own\)) ends with:$" "$ERR" ||
    fail "${way:-sessions}: the rank's stderr is not named as its own: $(cat "$ERR")"
  err_has "minitrain: error: checkpoint $WORK/ck-a/ckpt-00000002.bin: not a minitrain checkpoint"
  grep -q "launcher's stderr" "$ERR" && fail "${way:-sessions}: labelled as a launcher's: $(cat "$ERR")"
done
echo ok
