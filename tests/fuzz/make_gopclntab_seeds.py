#!/usr/bin/env python3
"""Writes the seeds of fuzz_gopclntab: small .gopclntab images in each
layout podprof reads (Go 1.16, 1.18, 1.20), as the harness and the unit
tests expect them:

    0x000  runtime.moduledata (its first words: the table, the name table's
           slice, text at word 22, go:func.* at word 38 or 40)
    0x200  go:func.*: main.b's inline tree (one call of main.inl)
    0x300  the table: header, names, cutab, filetab, pctab, functab, _funcs

The image sits at vaddr 0x400000, the code at 0x401000: main.a [0x00,0x40),
main.b [0x40,0x80) (with main.inl inlined at [0x50,0x60)), runtime.goexit
[0x80,0xc0). pcsp: 0 for 4 bytes, then 0x18, then 0 for the last 4.

    tests/fuzz/make_gopclntab_seeds.py tests/fuzz/corpus/gopclntab
"""
import os
import struct
import sys

VADDR = 0x400000
TEXT = 0x401000
TAB = 0x300
GOFUNC = 0x200
FUNCS = [("main.a", 0x00, 0x40), ("main.b", 0x40, 0x80), ("runtime.goexit", 0x80, 0xc0)]


def uvarint(v):
    out = b""
    while True:
        b = v & 0x7f
        v >>= 7
        if v:
            out += bytes([b | 0x80])
        else:
            return out + bytes([b])


def zigzag(v):
    return v << 1 if v >= 0 else ((-v - 1) << 1) | 1


def program(pairs):
    """pc-value pairs [(value, pc_len), ...] as a pc-value program."""
    out, val = b"", -1
    for value, n in pairs:
        out += uvarint(zigzag(value - val)) + uvarint(n)
        val = value
    return out + b"\0"


def image(ver):
    names = b""
    nameoff = {}
    for n in ["main.a", "main.b", "main.inl", "runtime.goexit"]:
        nameoff[n] = len(names)
        names += n.encode() + b"\0"
    pctab = b"\0"
    pcsp = len(pctab)
    pctab += program([(0, 4), (0x18, 0x38), (0, 4)])
    inl = len(pctab)
    pctab += program([(-1, 0x10), (0, 0x10), (-1, 0x20)])
    cutab, filetab = b"\0\0\0\0", b"\0\0\0\0"
    hdr_words = 8 if ver >= 118 else 7
    hdr_len = 8 + 8 * hdr_words
    off_names = hdr_len
    off_cu = off_names + len(names)
    off_file = off_cu + len(cutab)
    off_pc = off_file + len(filetab)
    off_pcln = (off_pc + len(pctab) + 7) & ~7
    nfunc = len(FUNCS)
    ent = 8 if ver >= 118 else 16
    func_size = 40 if ver == 118 else 44
    # functab, then the _funcs (4-aligned; 1.16's funcdata 8-aligned).
    recs, funcoffs = b"", []
    base = ent * (nfunc + 1)
    for name, lo, hi in FUNCS:
        at = base + len(recs)
        at = (at + 7) & ~7
        recs += b"\0" * (at - base - len(recs))
        funcoffs.append(at)
        is_b = name == "main.b"
        npcdata, nfuncdata = (3, 4) if is_b else (0, 0)
        entry = struct.pack("<I", lo) if ver >= 118 else struct.pack("<Q", TEXT + lo)
        flag = 1 if name == "runtime.goexit" else 0
        funcid = {116: 2, 118: 7, 120: 7}[ver] if name == "runtime.goexit" else 0
        body = struct.pack("<iiIIIIII", nameoff[name], 0, 0, pcsp, 0, 0, npcdata, 0)
        if ver >= 120:
            body += struct.pack("<i", 0)
        body += struct.pack("<BBBB", funcid, flag, 0, nfuncdata)
        rec = entry + body
        assert len(rec) == func_size
        if is_b:
            rec += struct.pack("<III", 0, 0, inl)
            if ver >= 118:
                rec += struct.pack("<IIII", 0xffffffff, 0xffffffff, 0xffffffff, 0)
            else:
                while (VADDR + TAB + off_pcln + at + len(rec)) & 7:
                    rec += b"\0"
                rec += struct.pack("<QQQQ", 0, 0, 0, VADDR + GOFUNC)
        recs += rec
    ftab = b""
    for (name, lo, hi), fo in zip(FUNCS, funcoffs):
        ftab += struct.pack("<II", lo, fo) if ver >= 118 else struct.pack("<QQ", TEXT + lo, fo)
    end = FUNCS[-1][2]
    ftab += struct.pack("<II", end, 0) if ver >= 118 else struct.pack("<QQ", TEXT + end, 0)
    pcln = ftab + recs
    magic = {116: 0xfffffffa, 118: 0xfffffff0, 120: 0xfffffff1}[ver]
    words = [nfunc, 1] + ([TEXT] if ver >= 118 else []) + [off_names, off_cu, off_file, off_pc, off_pcln]
    hdr = struct.pack("<IBBBB", magic, 0, 0, 1, 8) + b"".join(struct.pack("<Q", w) for w in words)
    tab = hdr + names + cutab + filetab + pctab
    tab += b"\0" * (off_pcln - len(tab)) + pcln
    # go:func.*: one inlined call of main.inl, its call site at main.b+0x08.
    if ver >= 120:
        tree = struct.pack("<BBBBiii", 0, 0, 0, 0, nameoff["main.inl"], 0x08, 0)
    else:
        tree = struct.pack("<hBBiiii", -1, 0, 0, 0, 0, nameoff["main.inl"], 0x08)
    md = [0] * 48
    md[0], md[1], md[22] = VADDR + TAB, VADDR + TAB + off_names, TEXT
    md[38 if ver < 120 else 40] = VADDR + GOFUNC
    if ver < 118:
        md = [0] * 48   # 1.16 needs no moduledata
    img = b"".join(struct.pack("<Q", w) for w in md)
    img += b"\0" * (GOFUNC - len(img)) + tree
    img += b"\0" * (TAB - len(img)) + tab
    return img


def main():
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    for ver in (116, 118, 120):
        with open(os.path.join(out, "go%d" % ver), "wb") as f:
            f.write(image(ver))


if __name__ == "__main__":
    main()
