#!/usr/bin/env bash
# For every planted switch on one rank: diff, then bisect --trust names exactly
# the op and scope `minitrain --print-planted` reports, role origin; the
# uninitialized read reads as one, the reordered sums as reduction order.
. "$(dirname "$0")/bisect-lib.sh"
for switch in atomic-bias-grad splitk autotune fused-ce uninit-pad; do
  bisect_names "$switch" 1
  case $switch in
    uninit-pad) json_true '"nothing wrote" in d["evidence"]["reading"]' ;;
    *) json_true '"reduction order" in d["evidence"]["reading"]' ;;
  esac
done
echo ok
