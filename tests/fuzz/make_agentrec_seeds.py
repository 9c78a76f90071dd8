#!/usr/bin/env python3
"""Seeds for fuzz_agentrec: memory images with the agent's header at their
start (agent/area.h, version 1): good records of three stacks, and a header
with no area yet. Writes into tests/fuzz/corpus/agentrec/."""
import os
import struct

BASE = 0x7f0000000000
FRAMES = 8
STACK = 80 + 8 * FRAMES
here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "agentrec")
os.makedirs(here, exist_ok=True)


def header(area, size):
    return b"PODPROFA" + struct.pack("<IIQQ", 1, 32, area, size)


def area(nstacks, max_stacks):
    return (b"PPAREA01" + struct.pack("<IIQQIIQQQQQQQQ", 1, 152, 65536, 256, STACK, FRAMES,
                                       max_stacks, nstacks, 0, 9, 0, 0, 1234, 0)
            + b"\0" * 48)


def stack(frames, counts):
    body = struct.pack("<QII8Q", 0x1234, len(frames), 0, *counts, *(10 * c for c in counts))
    return body + b"".join(struct.pack("<Q", f) for f in frames) + b"\0" * 8 * (FRAMES - len(frames))


img = bytearray(header(BASE + 64, 256 + 4 * STACK).ljust(64, b"\0"))
a = area(3, 4).ljust(256, b"\0")
img += a
img += stack([0x401001, 0x402001], (3, 300, 1, 100))
img += stack([0x403001], (0, 0, 0, 0))
img += stack([0x404001, 0, 0x405001], (1, 7, 0, 0))
with open(os.path.join(here, "good"), "wb") as f:
    f.write(bytes(img))
with open(os.path.join(here, "no-area"), "wb") as f:
    f.write(header(0, 0))
