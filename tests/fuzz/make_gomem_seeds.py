#!/usr/bin/env python3
"""Writes the seeds of fuzz_gomem: fake target memory holding a Go
runtime's memory-profile globals and buckets, as the harness reads them:

    0x00  five uint32 offsets into the image, in the order of struct
          pt_gomem_syms (mbuckets, mProfCycle, mProf, MemProfileRate,
          disableMemoryProfiling); 0xffffffff: the symbol is absent
    0x14  the image, at target address 0x10000 (its pointers absolute)

Inside the image: the globals at 0x00 (mbuckets), 0x10 (the cycle word),
0x20 (MemProfileRate), 0x28 (the flag), buckets from 0x40 in Go's 64-bit
layout (header next, allnext, typ, hash, size, nstk; stk[nstk]; memRecord:
active and future[3], each allocs, frees, alloc_bytes, free_bytes).

    tests/fuzz/make_gomem_seeds.py tests/fuzz/corpus/gomem
"""
import os
import struct
import sys

BASE = 0x10000
NONE = 0xffffffff
PC = 0x401000


class Image:
    def __init__(self, cycle=0, rate=512 * 1024, disable=0):
        self.b = bytearray(0x40)
        struct.pack_into("<I", self.b, 0x10, cycle)
        struct.pack_into("<q", self.b, 0x20, rate)
        self.b[0x28] = disable
        self.head = 0
        self.addrs = []

    def bucket(self, stk, rec, typ=1, nstk=None):
        """Prepends a bucket; rec is 16 counts (active, then the futures)."""
        at = BASE + len(self.b)
        n = len(stk) if nstk is None else nstk
        self.b += struct.pack("<6Q", 0, self.head, typ, 0x5eed, 64, n)
        self.b += struct.pack("<%dQ" % len(stk), *stk)
        self.b += struct.pack("<16Q", *rec)
        self.head = at
        struct.pack_into("<Q", self.b, 0, at)
        self.addrs.append(at)
        return at

    def link(self, frm, to):
        struct.pack_into("<Q", self.b, frm - BASE + 8, to)

    def seed(self, version=119):
        offs = [0x00, 0x10 if version >= 119 else NONE, 0x10 if version < 119 else NONE, 0x20, 0x28]
        return struct.pack("<5I", *offs) + bytes(self.b)


def rec(active, futures):
    out = []
    for allocs, frees in [active] + futures:
        out += [allocs, frees, allocs * 64, frees * 64]
    return out


def main(out):
    os.makedirs(out, exist_ok=True)
    seeds = {}
    im = Image(cycle=4 << 1 | 1)
    im.bucket([PC + 0x10, PC + 0x120, 0, PC + 0x230], rec((30, 12), [(1, 0), (2, 1), (3, 3)]))
    im.bucket([PC + 0x40], rec((5, 5), [(0, 0), (1, 0), (0, 0)]), typ=2)
    im.bucket([PC + 0x50, PC + 0x60], rec((7, 1), [(4, 4), (9, 9), (1, 1)]))
    seeds["go119"] = im.seed(119)
    seeds["go118"] = im.seed(118)
    im = Image(cycle=1 << 1)   # future[1] next: empty everywhere, so no GC has published
    im.bucket([PC + 0x10], rec((0, 0), [(4, 1), (0, 0), (2, 0)]))
    im.bucket([PC + 0x20, PC + 0x30], rec((0, 0), [(0, 0), (0, 0), (6, 2)]))
    seeds["before-gc"] = im.seed(119)
    im = Image(cycle=2)
    a = im.bucket([PC + 0x10], rec((3, 1), [(0, 0)] * 3))
    im.bucket([PC + 0x20], rec((3, 1), [(0, 0)] * 3))
    im.bucket([PC + 0x30], rec((3, 1), [(0, 0)] * 3))
    im.link(a, im.head)
    seeds["loop"] = im.seed(119)
    im = Image(cycle=2)
    im.bucket([PC + 0x10, PC + 0x20], rec((3, 1), [(0, 0)] * 3), nstk=1 << 40)
    seeds["nstk-huge"] = im.seed(119)
    im = Image(cycle=2, rate=0, disable=1)
    im.bucket([PC + 0x10], rec((3, 1), [(0, 0)] * 3))
    seeds["disabled"] = im.seed(119)
    for name, data in seeds.items():
        with open(os.path.join(out, name), "wb") as f:
            f.write(data)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "tests/fuzz/corpus/gomem")
