#!/usr/bin/env bash
# Regenerates testdata/minitrain/: small runs of the reference workload for
# tests and demos of `dtrace diff`, made with the built minitrain at a tiny
# model size (d_model 16, 1 layer, seq 8, batch 2) so they stay a few hundred KB.
#   tools/make-testdata.sh [BUILD_DIR [OUT_DIR]]   (default: build testdata/minitrain)
# MINITRAIN, when set, names the minitrain binary in place of BUILD_DIR's.
# The runs' replay argv names this machine's paths: they are for diffing; tests
# that replay (bisect) make their runs afresh with the built minitrain.
# tests/e2e/minitrain_testdata.sh runs this script into a temporary OUT_DIR and
# compares the result with the shipped runs, so a minitrain that no longer
# makes them fails the suite: then rerun this script and commit the runs.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
minitrain=${MINITRAIN:-$build/tools/minitrain/minitrain}
[ -x "$minitrain" ] || { echo "make-testdata: build minitrain first ($minitrain)" >&2; exit 2; }
out=${2:-testdata/minitrain}
rm -rf "$out"
mkdir -p "$out"
tiny=(--d-model 16 --layers 1 --heads 2 --seq 8 --corpus testdata/corpus.txt)
run() { "$minitrain" "${tiny[@]}" --batch "${BATCH:-2}" "$@" >/dev/null; }

# Two runs with the same seed: identical (dtrace diff exit 0).
run --steps 3 --ranks 2 --level step --out "$out/same-a"
run --steps 3 --ranks 2 --level step --out "$out/same-b"
# splitk planted, chaos seeds 1 and 2: diverge at step 0; at layer level the
# first origin is the layer holding the planted op.
run --steps 2 --level layer --nondet splitk --chaos-seed 1 --out "$out/splitk-a"
run --steps 2 --level layer --nondet splitk --chaos-seed 2 --out "$out/splitk-b"
# fused-ce planted: only the loss metric differs; parameters never do.
# (--batch 8: with 16 tokens the reordered sum too often rounds the same way.)
BATCH=8 run --steps 3 --level step --nondet fused-ce --chaos-seed 1 --out "$out/fused-ce-a"
BATCH=8 run --steps 3 --level step --nondet fused-ce --chaos-seed 2 --out "$out/fused-ce-b"
du -sh "$out"
