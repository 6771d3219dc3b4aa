#!/usr/bin/env bash
# For every planted switch on one rank: diff, then bisect --trust names exactly
# the op and scope `minitrain --print-planted` reports, role origin; the
# uninitialized read reads as one, the reordered sums as reduction order, each
# judged against the larger of the output's magnitude and the op's captured
# inputs' (which the evidence holds, and says which it used).
. "$(dirname "$0")/bisect-lib.sh"
for switch in atomic-bias-grad splitk autotune fused-ce uninit-pad; do
  bisect_names "$switch" 1
  json_true 'd["evidence"]["input_magnitude"] > 0 and d["evidence"]["output_magnitude"] is not None'
  json_true 'd["evidence"]["magnitude"] == ("inputs" if d["evidence"]["input_magnitude"] > d["evidence"]["output_magnitude"] else "output")'
  case $switch in
    uninit-pad) json_true '"nothing wrote" in d["evidence"]["reading"]' ;;
    *) json_true '"reduction order" in d["evidence"]["reading"]' ;;
  esac
done
echo ok
