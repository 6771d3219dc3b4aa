#!/usr/bin/env python3
"""Counts a PNG's distinct colours, with zlib only (no imaging library).

    png_colours.py FILE [#rrggbb ...]

Prints the number of distinct colours, then for each colour asked for how many
pixels have it. Reads 8-bit greyscale, RGB and RGBA, non-interlaced: what
Chromium's --screenshot writes.
"""
import struct
import sys
import zlib


def pixels(path):
    data = open(path, "rb").read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        sys.exit(f"{path}: not a PNG")
    pos, idat, header = 8, b"", None
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    width, height, depth, colour, _, _, interlace = header
    channels = {0: 1, 2: 3, 6: 4}.get(colour)
    if depth != 8 or channels is None or interlace:
        sys.exit(f"{path}: unsupported PNG (depth {depth}, colour type {colour}, interlace {interlace})")
    raw = zlib.decompress(idat)
    stride = width * channels
    previous = bytearray(stride)
    rows = []
    at = 0
    for _ in range(height):
        kind, line = raw[at], bytearray(raw[at + 1:at + 1 + stride])
        at += 1 + stride
        for i in range(stride):
            left = line[i - channels] if i >= channels else 0
            up = previous[i]
            corner = previous[i - channels] if i >= channels else 0
            if kind == 1:
                line[i] = (line[i] + left) & 255
            elif kind == 2:
                line[i] = (line[i] + up) & 255
            elif kind == 3:
                line[i] = (line[i] + (left + up) // 2) & 255
            elif kind == 4:
                p = left + up - corner
                pa, pb, pc = abs(p - left), abs(p - up), abs(p - corner)
                pred = left if pa <= pb and pa <= pc else up if pb <= pc else corner
                line[i] = (line[i] + pred) & 255
        rows.append(bytes(line))
        previous = line
    for line in rows:
        for x in range(width):
            px = line[x * channels:(x + 1) * channels]
            yield px[:3] if channels >= 3 else px * 3


def main():
    counts = {}
    for px in pixels(sys.argv[1]):
        counts[px] = counts.get(px, 0) + 1
    print(len(counts))
    for want in sys.argv[2:]:
        print(counts.get(bytes.fromhex(want.lstrip("#")), 0))


if __name__ == "__main__":
    main()
