#!/bin/bash
# The first screen: `dtrace --help` lists one line per command (details under
# `dtrace COMMAND --help`), and a mistyped command is answered with the closest
# one, as git does (dtrace(1), COMMANDS).
. "$(dirname "$0")/lib.sh"

run_dtrace 0 --help
# Every command, each on one line of its own with its summary, and no
# description's second line (the details are the command's own --help).
for command in record diff bisect show check replicas watch hash env exec verify tax; do
  [ "$(grep -cE "^  $command  +[a-z]" "$OUT")" = 1 ] || fail "no one-line entry for $command"
done
out_has "  diff        name the first step, rank and record where two runs diverge"
out_has "'dtrace COMMAND --help' describes a command"
out_lacks "A run is a directory of *.jsonl files"
[ "$(wc -l <"$OUT")" -le 24 ] || fail "dtrace --help is longer than a first screen ($(wc -l <"$OUT") lines)"
# The details are where the first screen says.
run_dtrace 0 diff --help
out_has "A run is a directory of *.jsonl files or one .jsonl file."
out_lacks "describes a command"

# A mistyped command: the closest, exit 2, and nothing run.
run_dtrace 2 difff run-a run-b
[ "$(cat "$ERR")" = "dtrace: error: unknown command 'difff'; did you mean 'diff'?" ] || fail "difff"
run_dtrace 2 bisetc --trust
err_has "unknown command 'bisetc'; did you mean 'bisect'?"
run_dtrace 2 shwo run-a
err_has "did you mean 'show'?"
# Nothing close: no guess, the way to the list.
run_dtrace 2 frobnicate
[ "$(cat "$ERR")" = "dtrace: error: unknown command 'frobnicate' (see dtrace --help)" ] || fail "frobnicate"
# A real command still runs, and no command at all is still CLI11's error.
run_dtrace 0 hash "$TESTDATA/corpus.txt"
run_dtrace 2
err_has "A subcommand is required"
echo PASS
