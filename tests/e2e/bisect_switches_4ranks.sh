#!/usr/bin/env bash
# The same on four ranks (threads of one process), allreduce-arrival included:
# bisect follows the rank diff named and says which ranks the replays ran.
. "$(dirname "$0")/bisect-lib.sh"
for switch in atomic-bias-grad splitk autotune fused-ce uninit-pad allreduce-arrival; do
  bisect_names "$switch" 4
  json_is ranks_replayed '[0, 1, 2, 3]'
  json_is rank 0
done
echo ok
