#!/usr/bin/env bash
# Makes, once per machine, a Debian 13 (trixie) root with its python3-torch 2.x,
# so that dtrace_torch's tests run on the torch users run today as well as on
# Debian 12's torch 1.13 (docs/torch.md, Tested versions). Reused when it exists
# and is complete; safe to run repeatedly and from several checkouts at once.
#   tools/setup-torch2.sh [--lib LIBDTRACE_SO]
# Prints the root's python, the command a test runs as its $PYTHON
# (TORCH_PYTHON, tests/e2e/torch-lib.sh): ROOT-python3 beside the root.
#
# Where: DTRACE_TORCH2_ROOT, default /var/cache/dtrace/trixie. A cache of the
# machine, not of a build directory: CI builds a fresh clone each time and
# several worktrees share a machine, and 1.7 GB made in about 5 minutes is worth
# making once. Built in ROOT.new and renamed when complete, so a root that
# exists is complete; the file ROOT/.dtrace-torch2 names what went into it, and
# a root made with other packages is made again.
#
# --lib: libdtrace built on the host is loaded in the root as it is (the root's
# glibc and libstdc++ are newer than the ones it was built against). The
# libraries it needs that the root lacks are copied from the host into the
# root's /usr/local/lib/dtrace-host: trixie's sonames differ from bookworm's
# for some (libsimdjson.so.14 here, .so.25 there), so installing trixie's
# packages would not give them; copying the host's gives the very files the
# build linked against. Run again after each build (tools/test.sh does).
#
# Running in the root: ROOT-python3 (written below) enters it by chroot in a
# mount namespace of its own (unshare), with /proc, /dev, /sys, /tmp, $TMPDIR,
# /etc/hosts, /etc/resolv.conf and the directories in DTRACE_TORCH2_BINDS
# (colon-separated: the source and build trees) bind-mounted at the same
# paths, so the paths a test names are valid inside. The mounts belong to that
# namespace and vanish with its last process: nothing is left mounted on the
# host to unmount, however the command ends (a killed test included), and
# concurrent calls do not share mounts. In the root the same path is a link to
# /usr/bin/python3, so sys.executable (the interpreter dtrace_torch records in
# a replay command) is ROOT-python3: dtrace's replays, run on the host, enter
# the root again, and a python the test starts from inside the root (torchrun's
# ranks) runs there directly.
set -euo pipefail
root=${DTRACE_TORCH2_ROOT:-/var/cache/dtrace/trixie}
lib=""
while [ $# -gt 0 ]; do
  case "$1" in
    --lib) lib=$2; shift 2 ;;
    *) echo "usage: $0 [--lib LIBDTRACE_SO]" >&2; exit 2 ;;
  esac
done
case "$root" in /?*) ;; *) echo "DTRACE_TORCH2_ROOT must be an absolute path: $root" >&2; exit 2 ;; esac
root=${root%/}
python=$root-python3
mirror=${DTRACE_TORCH2_MIRROR:-http://deb.debian.org/debian}
# python3-torch: the point; python3-numpy: torch_generators; procps: ps for the
# tests' process checks run from Python; g++, python3-dev, python3-setuptools
# and libtorch-dev: what torch.compile's inductor needs to build its C++
# kernels on the CPU (a compiler, Python.h, and torch's own headers).
packages="python3-torch python3-numpy procps g++ python3-dev python3-setuptools libtorch-dev"
stamp="trixie minbase $packages"
[ "$(id -u)" -eq 0 ] || { echo "$0: chroot and mount need root" >&2; exit 2; }
mkdir -p "$(dirname "$root")"

exec 9>"$root.lock"
flock 9   # a second caller waits for the first's root, then reuses it

if [ "$(cat "$root/.dtrace-torch2" 2>/dev/null)" != "$stamp" ]; then
  if ! command -v debootstrap >/dev/null; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap >/dev/null
  fi
  # Never mounted on (the mounts live in private namespaces), so removal cannot
  # reach through into a bind-mounted tree; --one-file-system all the same.
  rm -rf --one-file-system "$root.new" "$root"
  t0=$(date +%s)
  debootstrap --variant=minbase trixie "$root.new" "$mirror" >"$root.new.log" 2>&1 ||
    { tail -n 20 "$root.new.log" >&2; echo "$0: debootstrap failed (log: $root.new.log)" >&2; exit 1; }
  t1=$(date +%s)
  # apt in the root needs /proc for some maintainer scripts; a private namespace again.
  # shellcheck disable=SC2016 # expanded by the inner shell
  unshare --mount sh -c 'mount --rbind /proc "$1/proc" && mount --rbind /dev "$1/dev" &&
    cp /etc/resolv.conf "$1/etc/resolv.conf" &&
    chroot "$1" env DEBIAN_FRONTEND=noninteractive sh -c "apt-get update -qq &&
      apt-get install -y -qq --no-install-recommends $2 && apt-get clean"' \
    sh "$root.new" "$packages" >>"$root.new.log" 2>&1 ||
    { tail -n 20 "$root.new.log" >&2; echo "$0: installing $packages in the root failed (log: $root.new.log)" >&2; exit 1; }
  t2=$(date +%s)
  # The interpreter's path inside the root (see above).
  mkdir -p "$root.new$(dirname "$python")"
  ln -sfn /usr/bin/python3 "$root.new$python"
  echo "$stamp" >"$root.new/.dtrace-torch2"
  mv "$root.new" "$root"
  rm -f "$root.new.log"
  echo "setup-torch2: made $root: debootstrap $((t1 - t0)) s, $packages $((t2 - t1)) s," \
       "$(du -sh --one-file-system "$root" | cut -f1)" >&2
fi

# The host's entry to the root's python. Rewritten each time: cheap, and a
# changed script reaches every machine's existing root.
cat >"$python.tmp" <<EOF
#!/bin/sh
# python3 of the Debian 13 root $root (torch 2.x), written by tools/setup-torch2.sh.
root=$root
EOF
cat >>"$python.tmp" <<'EOF'
# Inside the root this path is a link to /usr/bin/python3; here it enters the root.
[ -e "$root/.dtrace-torch2" ] || { echo "$0: no root at $root (tools/setup-torch2.sh makes it)" >&2; exit 2; }
exec unshare --mount /bin/sh -c '
  root=$1 self=$2 cwd=$3; shift 3
  for d in /proc /dev /sys; do mount --rbind "$d" "$root$d" || exit 125; done
  for f in /etc/hosts /etc/resolv.conf; do
    [ -f "$f" ] || continue
    [ -e "$root$f" ] || : >"$root$f"
    mount --bind "$f" "$root$f" || exit 125
  done
  IFS=:
  for d in /tmp ${TMPDIR:-} ${DTRACE_TORCH2_BINDS:-}; do
    [ -n "$d" ] && [ -d "$d" ] || continue
    mkdir -p "$root$d" && mount --rbind "$d" "$root$d" || exit 125
  done
  unset IFS
  exec chroot "$root" /usr/bin/env -C "$cwd" "$self" "$@"
' sh "$root" "$0" "$(pwd -P)" "$@"
EOF
chmod +x "$python.tmp"
mv "$python.tmp" "$python"
# Debian 13's torch without libuv, working (tools/torch2_no_libuv.py says why):
# loaded by every python of the root through a .pth file.
site=$root/usr/lib/python3/dist-packages
cp "$(dirname "$0")/torch2_no_libuv.py" "$site/_dtrace_torch2_no_libuv.py"
echo "import _dtrace_torch2_no_libuv" >"$site/dtrace-torch2.pth"

if [ -n "$lib" ]; then
  [ -f "$lib" ] || { echo "$0: no $lib" >&2; exit 2; }
  hostlibs=$root/usr/local/lib/dtrace-host
  mkdir -p "$hostlibs"
  changed=0
  # NAME => PATH lines of the host's resolution; what the root resolves itself stays its own.
  while read -r name path; do
    found=0
    for d in lib/x86_64-linux-gnu usr/lib/x86_64-linux-gnu lib64 usr/lib; do
      [ -e "$root/$d/$name" ] && { found=1; break; }
    done
    [ "$found" = 1 ] && continue
    if ! cmp -s "$path" "$hostlibs/$name"; then cp -L "$path" "$hostlibs/$name"; changed=1; fi
  done < <(ldd "$lib" | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}')
  if [ "$changed" = 1 ] || [ ! -f "$root/etc/ld.so.conf.d/dtrace-host.conf" ]; then
    echo /usr/local/lib/dtrace-host >"$root/etc/ld.so.conf.d/dtrace-host.conf"
    chroot "$root" /sbin/ldconfig
  fi
fi
echo "$python"
