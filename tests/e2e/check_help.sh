#!/bin/bash
# `dtrace check --help` and `dtrace show --help` state the exit statuses.
. "$(dirname "$0")/lib.sh"

run_dtrace 0 check --help
out_has "Exit status: 0 certified, 1 violations, 2 unreadable"
run_dtrace 0 show --help
out_has "Exit status: 0 shown, 2 trouble"
