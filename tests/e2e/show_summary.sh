#!/bin/bash
# `dtrace show RUN`: header, files, ranks, steps per rank, record counts, completeness.
. "$(dirname "$0")/lib.sh"
D=$TESTDATA/check/clean

run_dtrace 0 show "$D"
out_has "run:        $D"
out_has "  $D/rank0.jsonl"
out_has "world_size: 2"
out_has "hash:       xxh3-64k/1"
out_has "level:      layer"
out_has "env:        CUBLAS_WORKSPACE_CONFIG=:4096:8 NCCL_ALGO=Ring"
out_has 'config:     {"lr":0.001,"seed":1234}'
out_has "replay:     protocol dtrace-replay/1, argv: python3 train.py --steps 3"
out_has "ranks:      2 of 2 present"
out_has "steps:      0-2 (3)"
out_has "complete:   yes"
out_has "  rank 1: steps 0-2 (3), 9 records, complete"
out_lacks "records ("

run_dtrace 0 show --json "$D"
json_is header.run '"a"'
json_is header.world_size 2
json_is header.level '"layer"'
json_is header.env.NCCL_ALGO '"Ring"'
json_is header.replay.protocol '"dtrace-replay/1"'
json_is files "[\"$D/rank0.jsonl\", \"$D/rank1.jsonl\"]"
json_is ranks_present 2
json_is ranks_absent '""'
json_is steps '"0-2"'
json_is records 18
json_is complete true
json_is ranks.0.steps '"0-2"'
json_is ranks.0.records 9
json_is ranks.1.unfinished '[]'
json_true '"selected" not in d'
