#!/usr/bin/env python3
"""Writes the ELF seed corpus for fuzz_elf (tests/fuzz/corpus/elf): tiny
images that reach each path of the reader. Re-run to regenerate.
  symtab    section headers, .symtab/.strtab, a GNU build-id note
  dynamic   a memory-layout image: PT_DYNAMIC -> DT_SYMTAB/DT_STRTAB
  minidebug .gnu_debugdata holding the symtab image, xz-compressed
"""
import lzma
import os
import struct

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus", "elf")


def ehdr(phoff, phnum, shoff, shnum, shstrndx):
    ident = b"\x7fELF" + bytes([2, 1, 1]) + bytes(9)
    return ident + struct.pack("<HHIQQQIHHHHHH", 3, 62, 1, 0x1000, phoff, shoff, 0, 64, 56, phnum, 64,
                               shnum, shstrndx)


def shdr(name, typ, off, size, link=0, entsize=0, addr=0):
    return struct.pack("<IIQQQQIIQQ", name, typ, 0, addr, off, size, link, 0, 8, entsize)


def sym(name, value, size, info=0x12, shndx=1):
    return struct.pack("<IBBHQQ", name, info, 0, shndx, value, size)


def symtab_image(extra_sections=()):
    strtab = b"\0hot_a\0hot_b\0level3\0"
    syms = sym(0, 0, 0, 0, 0) + sym(1, 0x1000, 0x40) + sym(7, 0x1040, 0x20) + sym(13, 0x1060, 0x10, 0x02)
    note = struct.pack("<III", 4, 20, 3) + b"GNU\0" + bytes(range(20))
    names = [b"", b".symtab", b".strtab", b".note.gnu.build-id", b".shstrtab"] + [n for n, _ in extra_sections]
    shstr = b"\0".join(names) + b"\0"
    off = {}
    pos = 0
    for n in names:
        off[n] = pos
        pos += len(n) + 1
    body = b""
    base = 64
    parts = [("sym", syms), ("str", strtab), ("note", note), ("shstr", shstr)] + \
            [("x%d" % i, d) for i, (_, d) in enumerate(extra_sections)]
    where = {}
    for key, data in parts:
        while (base + len(body)) % 8:
            body += b"\0"
        where[key] = (base + len(body), len(data))
        body += data
    while (base + len(body)) % 8:
        body += b"\0"
    shoff = base + len(body)
    sh = shdr(0, 0, 0, 0)
    sh += shdr(off[b".symtab"], 2, *where["sym"], link=2, entsize=24)
    sh += shdr(off[b".strtab"], 3, *where["str"])
    sh += shdr(off[b".note.gnu.build-id"], 7, *where["note"])
    sh += shdr(off[b".shstrtab"], 3, *where["shstr"])
    for i, (n, _) in enumerate(extra_sections):
        sh += shdr(off[n], 1, *where["x%d" % i])
    return ehdr(0, 0, shoff, 5 + len(extra_sections), 4) + body + sh


def dynamic_image():
    dynstr = b"\0exported_fn\0"
    dynsym = sym(0, 0, 0, 0, 0) + sym(1, 0x1100, 0x30)
    # layout: ehdr(64) phdr(56) at 64, dynsym at 0x100, dynstr right after, dynamic at 0x200
    img = bytearray(0x300)
    img[0:64] = ehdr(64, 1, 0, 0, 0)
    img[64:120] = struct.pack("<IIQQQQQQ", 2, 6, 0x200, 0x200, 0x200, 0x60, 0x60, 8)  # PT_DYNAMIC
    img[0x100:0x100 + len(dynsym)] = dynsym
    strtab = 0x100 + len(dynsym)
    img[strtab:strtab + len(dynstr)] = dynstr
    dyn = struct.pack("<qQqQqQqQqQ", 6, 0x100, 5, strtab, 10, len(dynstr), 11, 24, 0, 0)
    img[0x200:0x200 + len(dyn)] = dyn
    return bytes(img)


def main():
    os.makedirs(OUT, exist_ok=True)
    plain = symtab_image()
    seeds = {
        "symtab": plain,
        "dynamic": dynamic_image(),
        "minidebug": symtab_image([(b".gnu_debugdata", lzma.compress(plain, format=lzma.FORMAT_XZ))]),
    }
    for name, data in seeds.items():
        with open(os.path.join(OUT, name), "wb") as f:
            f.write(data)


main()
