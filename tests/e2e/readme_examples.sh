#!/bin/bash
# Every example in README.md is a real run: each fenced block whose first line
# starts with "$ " is a transcript. Its commands run here, in order and in one
# directory (relative paths, as a user in build/demo/ types them), with
# `dtrace` and `minitrain` on PATH; what each prints on stdout must be the
# lines under it in the block. Exit statuses and stderr are not compared (the
# README states the statuses in its text; stderr is bisect's progress).
#
# The rule that keeps a transcript true when only the noise changes, applied to
# both sides line by line:
#   - a time, a decimal number followed by " s" or " ms", reads <time>;
#   - a hash, 16 hexadecimal digits, reads <hash> (a nondeterministic kernel
#     gives different bits each run: that is the example's point);
#   - a README line "..." stands for any number of lines, none included;
#   - a README line ending in "..." stands for one line that starts with what
#     comes before the "..." (counts that change from run to run, such as how
#     many elements a random reduction order changed).
. "$(dirname "$0")/lib.sh"
: "${MINITRAIN:?MINITRAIN must name the minitrain binary}"
README=${README:-$E2E_LIB_DIR/../../README.md}
[ -f "$README" ] || fail "no README at $README"

mkdir bin
ln -s "$DTRACE" bin/dtrace
ln -s "$MINITRAIN" bin/minitrain
mkdir demo
# The runs get a directory of their own, as in build/demo/.
cd demo || fail "cd demo"
PATH="$WORK/bin:$PATH" /usr/bin/python3 - "$README" <<'PYEOF' || fail "README.md's examples differ from what dtrace prints (above)"
import re, subprocess, sys

TIME = re.compile(r"\b\d+\.\d+ m?s\b")
HASH = re.compile(r"\b[0-9a-f]{16}\b")

def norm(line):
    return HASH.sub("<hash>", TIME.sub("<time>", line.rstrip()))

def blocks(text):
    """The transcripts: fenced blocks whose first line starts with "$ "."""
    found, inside, lines = [], False, []
    for line in text.split("\n"):
        if line.startswith("```"):
            if inside and lines and lines[0].startswith("$ "):
                found.append(lines)
            inside, lines = not inside, []
        elif inside:
            lines.append(line)
    return found

def matches(want, got):
    """want (the README's lines) against got (what ran), with "..." lines."""
    if not want:
        return not got
    head = want[0]
    if head == "...":
        return any(matches(want[1:], got[i:]) for i in range(len(got) + 1))
    if not got:
        return False
    if head.endswith("..."):
        ok = got[0].startswith(head[:-3])
    else:
        ok = head == got[0]
    return ok and matches(want[1:], got[1:])

examples = blocks(open(sys.argv[1]).read())
if not examples:
    sys.exit("README.md holds no example to check")
bad = 0
for block in examples:
    commands = []  # (command, the README's lines under it)
    for line in block:
        if line.startswith("$ "):
            commands.append((line[2:], []))
        else:
            commands[-1][1].append(line)
    for command, want in commands:
        out = subprocess.run(["bash", "-c", command], stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, text=True).stdout
        got = [norm(l) for l in out.rstrip("\n").split("\n")] if out else []
        if not matches([norm(l) for l in want], got):
            bad += 1
            print(f"README.md: $ {command}\n--- README\n" + "\n".join(want) +
                  "\n--- ran\n" + out, file=sys.stderr)
print(f"{sum(len(b) for b in examples)} lines in {len(examples)} examples checked")
sys.exit(1 if bad else 0)
PYEOF
echo PASS
