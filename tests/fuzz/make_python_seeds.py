#!/usr/bin/env python3
"""Writes the seeds of fuzz_python: small memory images of a CPython 3.11
process at 0x10000000, as the harness reads them: the runtime state at 0
(interpreters.head at 40), an interpreter, a thread state for tid 1 whose
current frame is the innermost of three (inner <- outer, entry <- <module>,
entry), their code objects, names (one UCS-2) and location tables. The
offsets are those of ptrace/runtimes/python/interp.c's 3.11 layout. seed-bulk also puts the
frames in the thread state's frame stack (datastack chunk, top and limit).

    tests/fuzz/make_python_seeds.py tests/fuzz/corpus/python
"""
import os
import struct
import sys

BASE = 0x10000000
TS_NEXT, TS_TID, TS_CFRAME, TS_CHUNK, TS_TOP, TS_LIMIT, TS_SIZE = 8, 160, 56, 296, 304, 312, 360
FR_CODE, FR_PREV, FR_INSTR, FR_ENTRY, FR_SIZE = 32, 48, 56, 68, 72
CO_FIRST, CO_FILE, CO_NAME, CO_QUAL, CO_LT, CO_CODE = 72, 112, 120, 128, 136, 184


class Image:
    def __init__(self):
        self.b = bytearray(4096)
        self.next = 64

    def alloc(self, n):
        a = self.next
        self.next = (a + n + 15) & ~15
        return BASE + a

    def put(self, addr, fmt, *v):
        struct.pack_into(fmt, self.b, addr - BASE, *v)

    def str(self, s):
        if all(ord(c) < 128 for c in s):
            a = self.alloc(48 + len(s))
            self.put(a + 16, "<Q", len(s))
            self.b[a - BASE + 32] = (1 << 2) | (1 << 5) | (1 << 6)
            self.b[a - BASE + 48:a - BASE + 48 + len(s)] = s.encode()
        else:
            a = self.alloc(72 + 2 * len(s))
            self.put(a + 16, "<Q", len(s))
            self.b[a - BASE + 32] = (2 << 2) | (1 << 5)
            self.b[a - BASE + 72:a - BASE + 72 + 2 * len(s)] = s.encode("utf-16-le")
        return a

    def code(self, name, file, first):
        lt = bytes([0x80 | (13 << 3) | 7, 4, 0x80 | (10 << 3) | 3, 0, 1])
        b = self.alloc(32 + len(lt))
        self.put(b + 16, "<Q", len(lt))
        self.b[b - BASE + 32:b - BASE + 32 + len(lt)] = lt
        c = self.alloc(CO_CODE + 32)
        self.put(c + CO_FIRST, "<i", first)
        self.put(c + CO_NAME, "<Q", self.str(name))
        self.put(c + CO_QUAL, "<Q", self.str(name))
        self.put(c + CO_FILE, "<Q", self.str(file))
        self.put(c + CO_LT, "<Q", b)
        return c

    def frame(self, code, unit, prev, entry):
        f = self.alloc(FR_SIZE)
        self.put(f + FR_CODE, "<Q", code)
        self.put(f + FR_INSTR, "<Q", code + CO_CODE + 2 * unit)
        self.put(f + FR_PREV, "<Q", prev)
        self.b[f - BASE + FR_ENTRY] = entry
        return f


def seed(bulk):
    im = Image()
    inner, outer = im.code("Klass.inner", "/app/lib.py", 10), im.code("outer", "/app/lib.py", 30)
    mod = im.code("<module>", "/app/m\u00e9in.py", 1)
    f2 = im.frame(mod, 3, 0, 1)
    f1 = im.frame(outer, 0, f2, 1)
    f0 = im.frame(inner, 5, f1, 0)
    interp, ts, cf = im.alloc(64), im.alloc(TS_SIZE), im.alloc(24)
    im.put(BASE + 40, "<Q", interp)
    im.put(interp + 16, "<Q", ts)
    im.put(ts + TS_TID, "<Q", 1)
    im.put(ts + TS_CFRAME, "<Q", cf)
    im.put(cf + 8, "<Q", f0)
    if bulk:
        im.put(ts + TS_CHUNK, "<Q", f2 - 24)
        im.put(ts + TS_TOP, "<Q", f0 + FR_SIZE)
        im.put(ts + TS_LIMIT, "<Q", f0 + FR_SIZE + 64)
    return bytes(im.b[:im.next])


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    for name, bulk in (("seed-far", False), ("seed-bulk", True)):
        with open(os.path.join(out, name), "wb") as f:
            f.write(seed(bulk))


main()
