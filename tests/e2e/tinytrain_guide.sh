#!/usr/bin/env bash
# docs/integrating.md followed as a user would, so the guide cannot rot: dtrace
# installed into a staging directory (`meson install --destdir`), then the
# commands of the guide's walkthrough (the `$ ` lines of the ```console blocks
# of its section 3) run in order in an empty directory with the environment
# section 1 says to set. Each must exit as its `# exit N` comment says (0
# without one), and every output line the guide shows under it (except `...`)
# must be part of a line it printed, in the order shown.
# Also what the install gives such a program: dtrace-recorder.pc usable where
# nlohmann_json.pc is not installed, the recorder archive without debug
# information, the JSON Schemas in share/dtrace/.
set -euo pipefail
: "${BUILD_ROOT:?}" "${SOURCE_ROOT:?}" "${PREFIX:?}" "${LIBDIR:?}"
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT

meson install -C "$BUILD_ROOT" --destdir "$scratch/root" --no-rebuild --quiet >/dev/null
root="$scratch/root$PREFIX"
case "$LIBDIR" in /*) libdir="$scratch/root$LIBDIR" ;; *) libdir="$root/$LIBDIR" ;; esac

# The install itself.
pc="$libdir/pkgconfig/dtrace-recorder.pc"
archive="$libdir/libdtrace_recorder.a"
[ -f "$pc" ] || { echo "FAIL: $pc not installed"; exit 1; }
if grep -n nlohmann "$pc"; then echo "FAIL: dtrace-recorder.pc requires nlohmann_json, which no public header uses"; exit 1; fi
if objdump -h "$archive" | grep '\.debug_info' >/dev/null; then
  echo "FAIL: the installed $archive carries debug information ($(stat -c %s "$archive") bytes)"
  exit 1
fi
echo "installed libdtrace_recorder.a: $(stat -c %s "$archive") bytes, no debug information"
for command in diff bisect show check env verify tax; do
  schema="$root/share/dtrace/dtrace-$command-1.schema.json"
  [ -f "$schema" ] || { echo "FAIL: $schema not installed"; exit 1; }
done

# pkg-config sees the staged dtrace and the two packages it requires, nothing
# else: nlohmann_json.pc is deliberately out of reach.
mkdir -p "$scratch/pc" "$scratch/bin" "$scratch/walk"
for p in libxxhash simdjson; do
  ln -s "$(pkg-config --variable=pcfiledir "$p")/$p.pc" "$scratch/pc/$p.pc"
done
# A sanitizer build's archive needs the sanitizer runtime: the program is then
# compiled with the same sanitizers, as its users would be (the guide's `c++`).
if nm -A "$archive" 2>/dev/null | grep __asan_report >/dev/null; then
  printf '#!/bin/sh\nexec %s -fsanitize=address,undefined "$@"\n' "$(command -v c++)" >"$scratch/bin/c++"
  chmod +x "$scratch/bin/c++"
fi

export PATH="$scratch/bin:$root/bin:$PATH"
export PKG_CONFIG_PATH="$libdir/pkgconfig"
export PKG_CONFIG_LIBDIR="$scratch/pc"
export PKG_CONFIG_SYSROOT_DIR="$scratch/root"
export DTRACE_SOURCE="$SOURCE_ROOT"
[ "$(command -v dtrace)" = "$root/bin/dtrace" ] || { echo "FAIL: the staged dtrace is not first on PATH"; exit 1; }

cd "$scratch/walk"
python3 - "$SOURCE_ROOT/docs/integrating.md" <<'EOF'
import re, subprocess, sys

text = open(sys.argv[1]).read()
section = text.split("\n## 3. Walkthrough", 1)[1].split("\n## 4.", 1)[0]
steps = []  # (command, exit status, lines shown)
for block in re.findall(r"```console\n(.*?)```", section, re.S):
    for line in block.splitlines():
        if line.startswith("$ "):
            command = line[2:]
            status = 0
            m = re.search(r"\s+# exit (\d+)$", command)
            if m:
                status, command = int(m.group(1)), command[: m.start()]
            steps.append((command, status, []))
        elif line.strip() and line.strip() != "...":
            steps[-1][2].append(line.strip())
if len(steps) < 8:
    sys.exit(f"FAIL: found only {len(steps)} walkthrough commands in the guide")

for command, status, shown in steps:
    print("$", command, flush=True)
    run = subprocess.run(["bash", "-c", command], capture_output=True, text=True)
    printed = run.stdout.splitlines()
    if run.returncode != status:
        sys.exit(f"FAIL: exit status {run.returncode}, the guide says {status}\n"
                 f"--- stdout\n{run.stdout}--- stderr\n{run.stderr}")
    at = 0
    for want in shown:
        while at < len(printed) and want not in printed[at]:
            at += 1
        if at == len(printed):
            sys.exit(f"FAIL: the guide shows '{want}', which the command did not print (in this order)\n"
                     f"--- stdout\n{run.stdout}--- stderr\n{run.stderr}")
        at += 1
print(f"{len(steps)} commands of the walkthrough ran as the guide says")
EOF
