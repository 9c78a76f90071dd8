#!/usr/bin/env python3
"""The structure of podprof's C code, counted: file sizes, raw allocation
sites, loops of files that call each other, includes that run up a layer.

    python3 scripts/structure.py [BUILD_DIR]       (default build/release)

Calls are read from the objects' symbols (nm), so build first (make). A
module is a .c file with its .h; a call from a.c to a function defined in
b.c is an edge a -> b; so is an include of b.h by a.c. Loops are the
strongly connected sets of that graph with more than one file. Layers are
folders (STANDS_ON below), each allowed to include and call only those it
stands on. Exits 1 when a rule below is broken, so that make lint can hold
them:
  - no .c file over MAX_LINES lines, no folder with more than
    MAX_C_PER_FOLDER .c files of its own;
  - every folder of C files is a layer, and includes or calls only the
    layers it stands on;
  - no raw malloc/calloc/realloc/strdup/free outside base/ (ALLOWED);
  - no loop of files;
  - one header per module: the functions a header declares are defined in
    the .c of the same name (a header with no .c declares types only).
"""
import os
import re
import subprocess
import sys

MAX_LINES = 800
MAX_C_PER_FOLDER = 16
TOP = ["agent", "base", "encoder", "ptrace", "sidecar"]
# The layers: each folder and those it stands on directly. A folder may
# include headers of, and call functions defined in, the folders it stands
# on and everything they may use (the closure), and nothing else: no arrow
# runs back up or across. Every folder that holds C files is listed here
# (a new one unlisted fails the check). docs/ARCHITECTURE.md explains them.
STANDS_ON = {
    "agent": [],                     # the allocation agent: libc only (its area.h is the records' contract)
    "base": [],                      # the one memory layer
    "encoder": ["base"],
    "ptrace/core": ["base"],         # the vocabulary: types, stack table, allocation records
    "ptrace/proc": ["ptrace/core"],  # /proc parsers (the sidecar's too)
    "ptrace/space": ["ptrace/proc"],  # a process's address space: files, symbols, memory, unwinding
    "ptrace/runtimes/go": ["ptrace/space"],
    "ptrace/runtimes/python": ["ptrace/space"],
    "ptrace/runtimes/jvm": ["ptrace/space"],
    "ptrace/perf": ["ptrace/proc"],  # perf_event rings: one per thread's event
    "ptrace/runtimes": ["ptrace/runtimes/go", "ptrace/runtimes/jvm", "ptrace/runtimes/python"],  # the runtimes' table
    "ptrace/mechanism": ["ptrace/runtimes"],  # ptrace: stops, events, captures
    "ptrace/rule": ["ptrace/mechanism", "ptrace/perf"],  # which threads a tick samples, both backends
    "ptrace/profile": ["ptrace/mechanism"],  # the neutral profile, merging
    "ptrace/allocs": ["ptrace/mechanism", "agent"],  # allocation records read from targets
    "ptrace/sampler": ["ptrace/rule", "ptrace/profile", "ptrace/allocs"],  # the thread, targets, requests
    "ptrace/sessions": ["ptrace/sampler"],  # one file per kind of request
    "sidecar/server": ["ptrace/sessions", "encoder"],  # HTTP, a request's trip, answers, targets, config
    "sidecar/profiles": ["sidecar/server"],  # one file per pprof endpoint
    "sidecar/pages": ["sidecar/server"],     # the index, health probes, metrics
    "sidecar": ["sidecar/profiles", "sidecar/pages"],   # main and the route table
}


def closure(layer, seen=None):
    seen = set() if seen is None else seen
    for d in STANDS_ON.get(layer, []):
        if d not in seen:
            seen.add(d)
            closure(d, seen)
    return seen


LAYERS = {layer: closure(layer) for layer in STANDS_ON}
# Files that may call the C library's allocator themselves: the layer, and
# the allocation agent, which defines the malloc family (it calls glibc's
# __libc_* entry points).
ALLOWED = {"base/mem.c", "agent/hooks.c"}   # agent/hooks.c is the malloc family itself
RAW = re.compile(r"(?<![\w.>])(malloc|calloc|realloc|reallocarray|strdup|strndup|free)\s*\(")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def sources():
    out = []
    for top in TOP:
        for d, dirs, names in os.walk(top):
            dirs.sort()
            out.extend(os.path.join(d, f) for f in sorted(names) if f.endswith((".c", ".h")))
    return out


TOKENS = re.compile(r'"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'|/\*.*?\*/|//[^\n]*', re.S)


def strip_comments(text):
    """Text with its comments, strings and characters blanked (newlines kept),
    read in one pass so that a "/*" inside a string starts no comment."""
    def blank(m):
        t = m.group(0)
        return '""' if t[0] in "\"'" else "\n" * t.count("\n")
    return TOKENS.sub(blank, text)


def module(path):
    return path[:-2]


def folder(path):
    return os.path.dirname(path)


def nm(obj, flag):
    r = subprocess.run(["nm", flag, obj], capture_output=True, text=True)
    return r.stdout.splitlines()


def call_edges(build):
    defined, used = {}, {}
    for path in sources():
        if not path.endswith(".c"):
            continue
        obj = os.path.join(build, path[:-2] + ".o")
        if not os.path.exists(obj):
            continue
        m = module(path)
        for line in nm(obj, "--defined-only"):
            parts = line.split()
            if len(parts) == 3 and parts[1] in "TDRB":
                defined[parts[2]] = m
        used[m] = {line.split()[-1] for line in nm(obj, "-u") if line.strip()}
    edges = {}
    for m, syms in used.items():
        for s in syms:
            t = defined.get(s)
            # The agent is a library of its own (libpodprof-alloc.so): its
            # malloc family is not what podprof's objects call.
            if t and t != m and (not t.startswith("agent/") or m.startswith("agent/")):
                edges.setdefault(m, {}).setdefault(t, set()).add(s)
    return edges


def include_edges():
    edges, ups = {}, []
    mods = {module(p) for p in sources() if p.endswith(".c")}
    for path in sources():
        text = open(path).read()
        m = module(path)
        for inc in INCLUDE.findall(text):
            if not os.path.exists(inc):
                continue
            if folder(inc) != folder(path) and folder(inc) not in LAYERS.get(folder(path), set()):
                ups.append((path, inc))
            t = module(inc)
            if t in mods and t != m and path.endswith(".c"):
                edges.setdefault(m, {}).setdefault(t, set()).add("#include")
    return edges, ups


DECL = re.compile(r"^[a-z][\w \*]*?\b(\w+)\s*\([^;{]*\)\s*(?:__attribute__\s*\(\(.*?\)\)\s*)?;",
                  re.M | re.S)


def misplaced_declarations(build):
    """Functions declared in a header but defined elsewhere than in the
    .c of the header's name: (header, function, where)."""
    defined = {}
    for path in sources():
        if path.endswith(".c"):
            obj = os.path.join(build, path[:-2] + ".o")
            if os.path.exists(obj):
                for line in nm(obj, "--defined-only"):
                    parts = line.split()
                    if len(parts) == 3 and parts[1] == "T":
                        defined[parts[2]] = path
    out = []
    for h in sources():
        if not h.endswith(".h"):
            continue
        text = strip_comments(open(h).read())
        text = re.sub(r"static inline[^{]*\{.*?\n\}", "", text, flags=re.S)
        for m in DECL.finditer(text):
            fn = m.group(1)
            where = defined.get(fn)
            if where and where != h[:-2] + ".c":
                out.append((h, fn, where))
    return out


def loops(edges):
    index, low, stack, on, out, n = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = n[0]
        n[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges.get(v, {}):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in list(edges):
        if v not in index:
            visit(v)
    return out


def main():
    build = sys.argv[1] if len(sys.argv) > 1 else "build/release"
    broken = 0
    files = sources()
    sizes = sorted(((sum(1 for _ in open(p)), p) for p in files if p.endswith(".c")), reverse=True)
    print("largest .c files (lines): " + ", ".join("%s %d" % (p, n) for n, p in sizes[:8]))
    over = [(n, p) for n, p in sizes if n > MAX_LINES]
    print(".c files over %d lines: %d%s" % (MAX_LINES, len(over),
          "".join("\n  %s %d" % (p, n) for n, p in over)))
    broken += len(over)
    raw = []
    for p in files:
        if p in ALLOWED:
            continue
        for i, line in enumerate(strip_comments(open(p).read()).splitlines(), 1):
            for m in RAW.finditer(line):
                raw.append("%s:%d: %s" % (p, i, m.group(1)))
    nfree = sum(1 for r in raw if r.endswith(": free"))
    print("raw allocation calls outside base/: %d in %d files (and %d raw frees)%s" % (
        len(raw) - nfree, len({r.split(":")[0] for r in raw if not r.endswith(": free")}), nfree,
        "".join("\n  " + r for r in raw[:40])))
    broken += len(raw)
    cedges = call_edges(build)
    iedges, ups = include_edges()
    edges = {}
    for e in (cedges, iedges):
        for a, ts in e.items():
            for b, why in ts.items():
                edges.setdefault(a, {}).setdefault(b, set()).update(why)
    found = loops(edges)
    print("loops of files calling or including each other: %d" % len(found))
    for comp in found:
        print("  " + " <-> ".join(c + ".c" for c in comp))
        for a in comp:
            for b in comp:
                if b in edges.get(a, {}):
                    print("    %s -> %s: %s" % (a, b, ", ".join(sorted(edges[a][b])[:6])))
    broken += len(found)
    print("includes of a layer not stood on: %d%s" % (len(ups), "".join(
        "\n  %s includes %s" % u for u in ups)))
    broken += len(ups)
    across = sorted((a, b, sorted(why)[:4]) for a, ts in cedges.items() for b, why in ts.items()
                    if folder(a) != folder(b) and folder(b) not in LAYERS.get(folder(a), set()))
    print("calls into a layer not stood on: %d%s" % (len(across), "".join(
        "\n  %s.c calls %s.c: %s" % (a, b, ", ".join(w)) for a, b, w in across)))
    broken += len(across)
    folders = {}
    for p in files:
        folders.setdefault(folder(p), []).append(p)
    unknown = sorted(f for f in folders if f not in STANDS_ON)
    print("folders of C files that are no layer: %d%s" % (len(unknown), "".join("\n  " + f for f in unknown)))
    broken += len(unknown)
    crowded = sorted((sum(p.endswith(".c") for p in ps), f) for f, ps in folders.items())
    crowded = [(n, f) for n, f in crowded if n > MAX_C_PER_FOLDER]
    print("folders with more than %d .c files: %d%s" % (MAX_C_PER_FOLDER, len(crowded), "".join(
        "\n  %s %d" % (f, n) for n, f in crowded)))
    broken += len(crowded)
    wrong = misplaced_declarations(build)
    print("functions declared in a header other than their module's: %d%s" % (len(wrong), "".join(
        "\n  %s declares %s, defined in %s" % w for w in wrong[:30])))
    broken += len(wrong)
    if not cedges:
        print("(no objects under %s: calls not read; run make first)" % build)
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
