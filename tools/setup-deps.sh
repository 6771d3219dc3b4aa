#!/usr/bin/env bash
# Installs the Debian 12 packages dtrace builds and tests with, if missing.
# Used by tools/demo.sh, tools/test.sh and .ci/run; safe to run repeatedly.
set -euo pipefail
packages=(meson ninja-build g++ pkg-config libcli11-dev libspdlog-dev nlohmann-json3-dev
          libxxhash-dev catch2 libsimdjson-dev python3 python3-jsonschema jq bc
          time   # /usr/bin/time: peak RSS in tests/e2e/watch_scale.sh and bad_long_line.sh
          strace # system calls counted in tests/e2e/diff_many_files.sh and tools/bench/many_files.sh
          ccache         # rebuilds of unchanged sources come from its cache (tools/test.sh)
          python3-torch  # python3-torch: dtrace_torch and its tests (tests/e2e/torch_*)
          python3-numpy  # the dtrace package's NumPy example and tests (e2e/python_recorder)
          chromium)      # chromium: the HTML report opened headless (tests/e2e/report_browser.sh)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep "install ok installed" >/dev/null || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
echo "installing: ${missing[*]}" >&2
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
