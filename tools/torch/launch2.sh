#!/usr/bin/env bash
# Starts two ranks of "$@" on this host as torchrun would (RANK, LOCAL_RANK,
# WORLD_SIZE, MASTER_ADDR, MASTER_PORT), waits for both; status 1 if either fails.
# Set DTRACE_TORCH_LAUNCHER to this script so replays restart both ranks through it.
# The port is one the system picks (as torchrun picks its own), free when asked.
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'); pids=()
for k in 0 1; do RANK=$k LOCAL_RANK=$k WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port "$@" & pids+=($!); done
rc=0; for p in "${pids[@]}"; do wait "$p" || rc=1; done; exit $rc
