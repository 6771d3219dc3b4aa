#!/usr/bin/env python3
"""The xxh3-64k/1 fingerprint (man/dtrace-fp.5) computed straight from the
stock xxHash library through ctypes, sharing no code with dtrace: the source of
the known answers pinned in tests/fingerprint_test.cpp and
tests/e2e/hash_known_answers.sh.

    tools/xxh3-64k-reference.py FILE...      '<fingerprint>  FILE', like dtrace hash
    tools/xxh3-64k-reference.py --pattern N  the fingerprint of pattern(N)
    tools/xxh3-64k-reference.py --write-pattern N FILE

pattern(N) is the N bytes b[i] = ((i * 2654435761) mod 2^32) >> 24: cheap to
write in any language, and every 64 KiB chunk differs from the others.
"""
import ctypes
import ctypes.util
import struct
import sys

CHUNK = 65536


def load_xxhash():
    for name in ("libxxhash.so.0", ctypes.util.find_library("xxhash")):
        if name:
            try:
                lib = ctypes.CDLL(name)
                break
            except OSError:
                continue
    else:
        sys.exit("xxh3-64k-reference: libxxhash not found (apt-get install libxxhash0)")
    lib.XXH3_64bits.restype = ctypes.c_uint64
    lib.XXH3_64bits.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
    return lib


def fingerprint(lib, data):
    words = [len(data)]
    for off in range(0, len(data), CHUNK):
        piece = data[off:off + CHUNK]
        words.append(lib.XXH3_64bits(piece, len(piece)))
    packed = struct.pack("<%dQ" % len(words), *words)
    return lib.XXH3_64bits(packed, len(packed))


def pattern(n):
    return bytes(((i * 2654435761) & 0xFFFFFFFF) >> 24 for i in range(n))


def main(argv):
    lib = load_xxhash()
    if len(argv) == 2 and argv[0] == "--pattern":
        print("%016x" % fingerprint(lib, pattern(int(argv[1]))))
    elif len(argv) == 3 and argv[0] == "--write-pattern":
        with open(argv[2], "wb") as out:
            out.write(pattern(int(argv[1])))
    elif argv and not argv[0].startswith("--"):
        for name in argv:
            with open(name, "rb") as f:
                print("%016x  %s" % (fingerprint(lib, f.read()), name))
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv[1:])
