#!/usr/bin/env bash
# Benchmark of the fingerprint (issue 5), one table at the end.
#
# CPU (always): a 1 GiB file (random bytes, made once in $WORK) is put in the
# page cache; then, alternating, REPEATS times each:
#   xxh3      one XXH3_64bits pass over the mapped file (tools/bench/xxh3_file)
#   dtrace/1  dtrace hash --threads 1 FILE
#   dtrace/N  dtrace hash --threads 0 FILE   (all cores)
# Wall time of the whole process, median; the processes map and read the file
# the same way, so they differ only in the hashing. Targets: xxh3/dtrace/1 at
# least 0.9 per core, dtrace/N faster than xxh3. Then the same three in one
# process over a pre-faulted mapping (tools/bench/fingerprint_cpu): the hashing
# alone, without the kernel's page-mapping work, which on a small VM can be
# most of the whole-process time.
# GPU (CUDA builds with a device): tools/bench/fingerprint_gpu (1 GiB device
# buffer vs a device-to-device copy; 10,000 tensors of 4 KiB..1 MiB in one
# batch) and, where python3 has a CUDA torch, torch.hash_tensor's ratio.
# Without a device those rows say "not measured".
#
#   tools/bench/fingerprint.sh [BUILD_DIR] [REPEATS]     (defaults: build-release, 5)
set -euo pipefail
build=${1:-build-release}
. "$(dirname "$0")/release.sh"
release_build "$build"
repeats=${2:-5}
work=${WORK:-/tmp/dtrace-bench-fingerprint}
dtrace="$build/dtrace"
xxh3_file="$build/tools/bench/xxh3_file"
file="$work/1GiB.bin"

mkdir -p "$work"
if [ ! -f "$file" ] || [ "$(stat -c %s "$file")" -ne $((1 << 30)) ]; then
  head -c $((1 << 30)) /dev/urandom >"$file.tmp" && mv "$file.tmp" "$file"
fi
cat "$file" >/dev/null  # page cache warm

elapsed() { local t0; t0=$(now); "$@" >/dev/null; echo "$(now) - $t0" | bc -l; }

load_before=$(cut -d' ' -f1-3 /proc/loadavg)
xxh3_t=() one_t=() all_t=()
for ((i = 0; i < repeats; i++)); do
  xxh3_t+=("$(elapsed "$xxh3_file" "$file")")
  one_t+=("$(elapsed "$dtrace" hash --threads 1 "$file")")
  all_t+=("$(elapsed "$dtrace" hash --threads 0 "$file")")
done
inproc=$("$build/tools/bench/fingerprint_cpu" "$file" "$repeats")
load_after=$(cut -d' ' -f1-3 /proc/loadavg)
d1=$("$dtrace" hash --threads 1 "$file" | cut -d' ' -f1)
dn=$("$dtrace" hash --threads 0 "$file" | cut -d' ' -f1)
[ "$d1" = "$dn" ] || { echo "fingerprint differs between 1 and all threads: $d1 $dn" >&2; exit 1; }

xxh3_s=$(printf '%s\n' "${xxh3_t[@]}" | median)
one_s=$(printf '%s\n' "${one_t[@]}" | median)
all_s=$(printf '%s\n' "${all_t[@]}" | median)
gbps() { echo "scale=2; 1.073741824 / $1" | bc -l; }
ratio() { echo "scale=2; $1 / $2" | bc -l; }

# GPU rows, when there is something to run them on.
declare -A gpu=()
gpu_note="not measured: no CUDA build ($build has no tools/bench/fingerprint_gpu)"
if [ -x "$build/tools/bench/fingerprint_gpu" ]; then
  set +e
  out=$("$build/tools/bench/fingerprint_gpu" --repeats "${GPU_REPEATS:-20}" 2>&1)
  status=$?
  set -e
  if [ $status -eq 77 ]; then
    gpu_note="not measured: ${out#SKIP: }"
  elif [ $status -ne 0 ]; then
    echo "$out" >&2
    gpu_note="FAILED (status $status, output above)"
  else
    gpu_note=""
    while read -r key value; do gpu[$key]=$value; done <<<"$out"
    torch_out=$(python3 "$(dirname "$0")/torch_hash.py" "$build/src/capi/libdtrace.so" 2>&1 || true)
    if [[ $torch_out == SKIP* ]] || [ -z "$torch_out" ]; then
      gpu[torch]="skipped (${torch_out#SKIP: })"
    else
      while read -r key value; do gpu[$key]=$value; done <<<"$torch_out"
    fi
  fi
fi

echo
echo "fingerprint benchmark  $(date -u +%Y-%m-%dT%H:%MZ)  $(nproc) cores  load ${load_before} -> ${load_after}"
echo "CPU: 1 GiB file in page cache, wall time of the whole process, median of $repeats"
printf '  %-34s %9s %9s %s\n' "what" "seconds" "GB/s" "vs xxh3"
printf '  %-34s %9.3f %9s %s\n' "XXH3_64bits, one pass" "$xxh3_s" "$(gbps "$xxh3_s")" "1.00"
printf '  %-34s %9.3f %9s %s\n' "dtrace hash --threads 1" "$one_s" "$(gbps "$one_s")" "$(ratio "$xxh3_s" "$one_s")  (target >= 0.90)"
printf '  %-34s %9.3f %9s %s\n' "dtrace hash (all $(nproc) cores)" "$all_s" "$(gbps "$all_s")" "$(ratio "$xxh3_s" "$all_s")  (target > 1)"
declare -A cpu=()
while read -r key value; do cpu[$key]=$value; done <<<"$inproc"
echo "CPU, hashing only: one process, pre-faulted mapping (MAP_POPULATE), median of $repeats"
printf '  %-34s %9.3f %9s %s\n' "XXH3_64bits, one pass" "${cpu[inproc_xxh3]}" "$(gbps "${cpu[inproc_xxh3]}")" "1.00"
printf '  %-34s %9.3f %9s %s\n' "dtrace::fingerprint, 1 thread" "${cpu[inproc_one]}" "$(gbps "${cpu[inproc_one]}")" "$(ratio "${cpu[inproc_xxh3]}" "${cpu[inproc_one]}")"
printf '  %-34s %9.3f %9s %s\n' "dtrace::fingerprint, $(nproc) threads" "${cpu[inproc_all]}" "$(gbps "${cpu[inproc_all]}")" "$(ratio "${cpu[inproc_xxh3]}" "${cpu[inproc_all]}")"
echo "CPU, XXH3 implementations this CPU runs (best first: the one dtrace uses), GB/s, median of $repeats"
echo "  (64 KiB and 1 MiB: one buffer hashed again and again, in the caches; file: the mapping, from memory)"
impls=$(printf '%s\n' "${!cpu[@]}" | sed -n 's/^impl_\(.*\)_64k$/\1/p')
printf '  %-12s %9s %9s %9s   %s\n' "what" "64 KiB" "1 MiB" "file" "vs libxxhash (64 KiB, 1 MiB, file)"
for impl in avx512 avx2 libxxhash; do
  grep -qx "$impl" <<<"$impls" || continue
  row=() vs=()
  for size in 64k 1m file; do
    row+=("$(gbps "${cpu[impl_${impl}_$size]}")")
    vs+=("$(ratio "${cpu[impl_libxxhash_$size]}" "${cpu[impl_${impl}_$size]}")")
  done
  printf '  %-12s %9s %9s %9s   %s\n' "$impl" "${row[@]}" "${vs[*]}"
done
echo "GPU:"
if [ -n "$gpu_note" ]; then
  echo "  $gpu_note"
else
  echo "  device ${gpu[device]:-?}"
  printf '  %-34s %9s TB/s  (target >= 3; checked against CPU: %s)\n' "1 GiB fingerprint" "${gpu[large_fingerprint_TBps]}" "${gpu[large_matches_cpu]}"
  printf '  %-34s %9s TB/s  (reads + writes; fingerprint/copy time %s)\n' "1 GiB device-to-device copy" "${gpu[large_copy_TBps_read_plus_write]}" "${gpu[large_fingerprint_over_copy_time]}"
  printf '  %-34s %9s TB/s  (target >= 1; %s tensors; checked: %s)\n' "batch, 4 KiB..1 MiB" "${gpu[batch_TBps]}" "${gpu[batch_tensors]}" "${gpu[batch_matches_cpu]}"
  if [ -n "${gpu[torch]:-}" ]; then
    echo "  torch.hash_tensor: ${gpu[torch]}"
  else
    printf '  %-34s %9s TB/s  (dtrace time / torch time %s, torch %s)\n' "torch.hash_tensor, 1 GiB int64" "${gpu[torch_hash_tensor_TBps]}" "${gpu[torch_dtrace_time_over_hash_tensor_time]}" "${gpu[torch_version]}"
  fi
fi
