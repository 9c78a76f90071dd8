// gooffsets: the Go runtime's layout per release, for podprof's goroutine
// reader, which reads a Go process from outside (stripped binaries too, so
// not from the target's DWARF) through the table printed here.
//
//	gooffsets [-o FILE] BINARY=GOROOT...
//
// Each BINARY is a Go program built with DWARF (scripts/gooffsets/probe) by
// the toolchain whose tree is GOROOT. From the binary's DWARF: the offsets
// and sizes of the runtime.g, gobuf, m, stack, memRecord members the reader
// needs, and which runtime globals DWARF has; from GOROOT/src/runtime: the
// wait reason strings (waitReasonStrings) and goroutine statuses
// (gStatusStrings, _G* constants), checked against the tables the binary
// itself holds. Prints a C file: the row type, then one row per binary,
// oldest release first. scripts/gooffsets.sh runs it end to end.
package main

import (
	"bytes"
	"debug/buildinfo"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// A column of the C row: a member name, what it holds, and how a binary
// gives it (-1: this release has no such thing).
type column struct {
	name, doc string
	get       func(b *binLayout, s *runtimeSource) int64
}

func off(strct, path string) func(*binLayout, *runtimeSource) int64 {
	return func(b *binLayout, _ *runtimeSource) int64 { return b.offset(strct, path) }
}

func size(strct, path string) func(*binLayout, *runtimeSource) int64 {
	return func(b *binLayout, _ *runtimeSource) int64 { return b.size(strct, path) }
}

// inDWARF: 1 when DWARF has the package variable (with an address), else 0.
func inDWARF(name string) func(*binLayout, *runtimeSource) int64 {
	return func(b *binLayout, _ *runtimeSource) int64 {
		if b.varAddr(name) != 0 {
			return 1
		}
		return 0
	}
}

func goConst(name string) func(*binLayout, *runtimeSource) int64 {
	return func(_ *binLayout, s *runtimeSource) int64 {
		if v, ok := s.consts[name]; ok {
			return v
		}
		return -1
	}
}

var columns = []column{
	{"g_size", "sizeof(runtime.g)", size("runtime.g", "")},
	{"g_stack_lo", "g.stack.lo: the stack's lowest address", off("runtime.g", "stack.lo")},
	{"g_stack_hi", "g.stack.hi: one past its highest", off("runtime.g", "stack.hi")},
	{"g_m", "g.m: *m running it, nil when not running", off("runtime.g", "m")},
	{"g_sched", "g.sched: the gobuf saved when it is not running", off("runtime.g", "sched")},
	{"gobuf_sp", "gobuf.sp, from the start of a gobuf", off("runtime.gobuf", "sp")},
	{"gobuf_pc", "gobuf.pc", off("runtime.gobuf", "pc")},
	{"gobuf_bp", "gobuf.bp: the frame pointer", off("runtime.gobuf", "bp")},
	{"gobuf_lr", "gobuf.lr (link register architectures; unused on amd64)", off("runtime.gobuf", "lr")},
	{"gobuf_ctxt", "gobuf.ctxt: closure context", off("runtime.gobuf", "ctxt")},
	{"gobuf_ret", "gobuf.ret: gone in 1.25", off("runtime.gobuf", "ret")},
	{"g_syscallsp", "g.syscallsp: sp to use when in _Gsyscall", off("runtime.g", "syscallsp")},
	{"g_syscallpc", "g.syscallpc", off("runtime.g", "syscallpc")},
	{"g_syscallbp", "g.syscallbp", off("runtime.g", "syscallbp")},
	{"g_atomicstatus", "g.atomicstatus", off("runtime.g", "atomicstatus")},
	{"g_atomicstatus_size", "its size", size("runtime.g", "atomicstatus")},
	{"g_atomicstatus_wrapped", "1: an atomic.Uint32 (value at +0), 0: a plain uint32", func(b *binLayout, _ *runtimeSource) int64 {
		_, t, ok := b.field("runtime.g", "atomicstatus")
		if !ok {
			return -1
		}
		if t.String() == "uint32" {
			return 0
		}
		return 1
	}},
	{"g_goid", "g.goid", off("runtime.g", "goid")},
	{"g_goid_size", "its size", size("runtime.g", "goid")},
	{"g_waitsince", "g.waitsince: nanotime when it blocked (int64; 0: not yet known)", off("runtime.g", "waitsince")},
	{"g_waitreason", "g.waitreason: index into wait_reasons", off("runtime.g", "waitreason")},
	{"g_waitreason_size", "its size", size("runtime.g", "waitreason")},
	{"g_lockedm", "g.lockedm: the m it is locked to (LockOSThread)", off("runtime.g", "lockedm")},
	{"g_tracking", "g.tracking (bool): scheduling latency tracking", off("runtime.g", "tracking")},
	{"g_tracking_seq", "g.trackingSeq (uint8): counts its every leaving of _Grunning (a new wait at the same place tells)", off("runtime.g", "trackingSeq")},
	{"g_parent_goid", "g.parentGoid", off("runtime.g", "parentGoid")},
	{"g_gopc", "g.gopc: pc of the go statement that created it", off("runtime.g", "gopc")},
	{"g_ancestors", "g.ancestors (*[]ancestorInfo; GODEBUG=tracebackancestors)", off("runtime.g", "ancestors")},
	{"g_startpc", "g.startpc: pc of its function", off("runtime.g", "startpc")},
	{"g_labels", "g.labels: pointer to runtime/pprof's labelMap, or nil", off("runtime.g", "labels")},
	{"labels_list", "offset in runtime/pprof's labelMap of its []{key, value string} (1.24 on); -1: labelMap is a map[string]string", func(b *binLayout, _ *runtimeSource) int64 {
		o, _ := b.labelList()
		return o
	}},
	{"label_size", "size of an element of that list", func(b *binLayout, _ *runtimeSource) int64 {
		_, sz := b.labelList()
		return sz
	}},
	{"m_g0", "m.g0", off("runtime.m", "g0")},
	{"m_procid", "m.procid: the thread's TID", off("runtime.m", "procid")},
	{"m_tls", "m.tls", off("runtime.m", "tls")},
	{"m_curg", "m.curg: the goroutine it runs", off("runtime.m", "curg")},
	{"stack_size", "sizeof(runtime.stack)", size("runtime.stack", "")},
	{"dwarf_allgs", "1: DWARF has runtime.allgs ([]*g)", inDWARF("runtime.allgs")},
	{"allgs_size", "its size (a slice header)", func(b *binLayout, _ *runtimeSource) int64 {
		if t := b.varType("runtime.allgs"); t != nil {
			return t.Size()
		}
		return -1
	}},
	{"dwarf_allglen", "1: DWARF has runtime.allglen", inDWARF("runtime.allglen")},
	{"dwarf_allglock", "1: DWARF has runtime.allglock", inDWARF("runtime.allglock")},
	{"dwarf_mbuckets", "1: DWARF has runtime.mbuckets", inDWARF("runtime.mbuckets")},
	{"dwarf_buckhash", "1: DWARF has runtime.buckhash", inDWARF("runtime.buckhash")},
	{"dwarf_mprofcycle", "1: DWARF has runtime.mProfCycle", inDWARF("runtime.mProfCycle")},
	{"bucket_size", "sizeof(runtime.bucket): the header before stk[nstk]", size("runtime.bucket", "")},
	{"memrecord_size", "sizeof(runtime.memRecord), after stk[nstk]", size("runtime.memRecord", "")},
	{"memrecord_active", "memRecord.active", off("runtime.memRecord", "active")},
	{"memrecord_future", "memRecord.future[3]", off("runtime.memRecord", "future")},
	{"memcycle_size", "sizeof(runtime.memRecordCycle)", size("runtime.memRecordCycle", "")},
	{"memcycle_allocs", "memRecordCycle.allocs", off("runtime.memRecordCycle", "allocs")},
	{"memcycle_frees", "memRecordCycle.frees", off("runtime.memRecordCycle", "frees")},
	{"memcycle_alloc_bytes", "memRecordCycle.alloc_bytes (-1: bytes are counts times bucket.size)", off("runtime.memRecordCycle", "alloc_bytes")},
	{"memcycle_free_bytes", "memRecordCycle.free_bytes", off("runtime.memRecordCycle", "free_bytes")},
	{"gscan", "_Gscan: the bit set on a status while the GC scans the stack", goConst("_Gscan")},
	{"gstatus_runnable", "_Grunnable", goConst("_Grunnable")},
	{"gstatus_running", "_Grunning", goConst("_Grunning")},
	{"gstatus_syscall", "_Gsyscall", goConst("_Gsyscall")},
	{"gstatus_waiting", "_Gwaiting", goConst("_Gwaiting")},
	{"gstatus_dead", "_Gdead", goConst("_Gdead")},
	{"gstatus_preempted", "_Gpreempted", goConst("_Gpreempted")},
	{"gstatus_leaked", "_Gleaked", goConst("_Gleaked")},
	{"gstatus_deadextra", "_Gdeadextra: a g kept for a C thread's callbacks", goConst("_Gdeadextra")},
}

type row struct {
	version      string // go1.26.10
	major, minor int
	values       []int64
	waitReasons  []string
	waitNames    []string
	statuses     []string
}

var versionRE = regexp.MustCompile(`^go(\d+)\.(\d+)`)

func makeRow(binPath, goroot string) (*row, error) {
	bi, err := buildinfo.ReadFile(binPath)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", binPath, err)
	}
	version := strings.Fields(bi.GoVersion)[0]
	m := versionRE.FindStringSubmatch(version)
	if m == nil {
		return nil, fmt.Errorf("%s: Go version %q", binPath, bi.GoVersion)
	}
	if v := goRootVersion(goroot); v != version {
		return nil, fmt.Errorf("%s is %s but %s/VERSION says %q", binPath, version, goroot, v)
	}
	b, err := readLayout(binPath)
	if err != nil {
		return nil, err
	}
	s, err := readSource(goroot)
	if err != nil {
		return nil, err
	}
	r := &row{version: version}
	r.major, _ = strconv.Atoi(m[1])
	r.minor, _ = strconv.Atoi(m[2])
	if b.typ("runtime/pprof.labelMap") == nil {
		return nil, fmt.Errorf("%s: no runtime/pprof.labelMap in DWARF: build scripts/gooffsets/probe", binPath)
	}
	for _, c := range columns {
		r.values = append(r.values, c.get(b, s))
	}
	if r.waitReasons, err = s.stringTable("waitReasonStrings"); err != nil {
		return nil, err
	}
	if r.statuses, err = s.stringTable("gStatusStrings"); err != nil {
		return nil, err
	}
	r.waitNames = make([]string, len(r.waitReasons))
	for _, n := range s.order["waitReason"] {
		if v := s.consts[n]; v >= 0 && v < int64(len(r.waitNames)) {
			r.waitNames[v] = n
		}
	}
	// The source's tables must be the ones the binary holds.
	var checked []string
	for _, t := range []struct {
		name string
		src  []string
	}{{"waitReasonStrings", r.waitReasons}, {"gStatusStrings", r.statuses}} {
		got, err := b.stringArray("runtime." + t.name)
		if err != nil {
			fmt.Fprintf(os.Stderr, "gooffsets: %s: %s not checked against the binary: %v\n", version, t.name, err)
			continue
		}
		if strings.Join(got, "\x00") != strings.Join(t.src, "\x00") {
			return nil, fmt.Errorf("%s: %s from %s differs from the binary's:\n%q\n%q", version, t.name, s.dir, t.src, got)
		}
		checked = append(checked, fmt.Sprintf("%s (%d)", t.name, len(got)))
	}
	if len(checked) > 0 {
		fmt.Fprintf(os.Stderr, "gooffsets: %s: %s from %s as in the binary\n", version, strings.Join(checked, " and "), s.dir)
	}
	seen := map[string]bool{}
	for _, miss := range b.missing {
		if !seen[miss] {
			seen[miss] = true
			fmt.Fprintf(os.Stderr, "gooffsets: %s: no %s (-1)\n", version, miss)
		}
	}
	return r, nil
}

func cIdent(r *row) string { return fmt.Sprintf("%d_%d", r.major, r.minor) }

func cString(s string) string { return strconv.Quote(s) } // the strings are ASCII

// changes lists, per pair of neighbouring rows, the columns that differ.
func changes(rows []*row) []string {
	var out []string
	for i := 1; i < len(rows); i++ {
		a, b := rows[i-1], rows[i]
		var diff []string
		for j, c := range columns {
			if a.values[j] != b.values[j] {
				diff = append(diff, fmt.Sprintf("%s %d -> %d", c.name, a.values[j], b.values[j]))
			}
		}
		if wa, wb := strings.Join(a.waitReasons, "\x00"), strings.Join(b.waitReasons, "\x00"); wa != wb {
			how := "renumbered"
			if strings.HasPrefix(wb, wa+"\x00") {
				how = "appended to"
			}
			diff = append(diff, fmt.Sprintf("wait reasons %d -> %d (%s)", len(a.waitReasons), len(b.waitReasons), how))
		}
		if strings.Join(a.statuses, "\x00") != strings.Join(b.statuses, "\x00") {
			diff = append(diff, fmt.Sprintf("statuses %d -> %d", len(a.statuses), len(b.statuses)))
		}
		out = append(out, fmt.Sprintf("go%d.%d -> go%d.%d: %s", a.major, a.minor, b.major, b.minor, strings.Join(diff, ", ")))
	}
	return out
}

func emit(w io.Writer, rows []*row) {
	var versions []string
	for _, r := range rows {
		versions = append(versions, r.version)
	}
	p := func(format string, a ...interface{}) { fmt.Fprintf(w, format, a...) }
	p("/* DO NOT EDIT: generated by scripts/gooffsets from %s binaries\n", strings.Join(versions, ", "))
	p(" * (scripts/gooffsets/probe built with DWARF by each toolchain) and their\n")
	p(" * runtime sources. Regenerate: scripts/gooffsets.sh\n *\n")
	p(" * The Go runtime's layout on amd64, one row per release, oldest first. A\n")
	p(" * reader takes the row of the target's major.minor (its buildinfo); a\n")
	p(" * release without a row of its own is not read (no guess: its layout may\n")
	p(" * differ), and the answer says so. Offsets and sizes in bytes; -1: the\n")
	p(" * release has no such member.\n *\n * What changed between rows:\n")
	for _, c := range changes(rows) {
		for i, line := range wrap(c, 72) {
			if i == 0 {
				p(" *   %s\n", line)
			} else {
				p(" *     %s\n", line)
			}
		}
	}
	p(" */\n#ifndef PODPROF_GORUNTIME_TABLES_INC\n#define PODPROF_GORUNTIME_TABLES_INC\n\n")
	p("#define GO_RT_RELEASE(major, minor) ((major) << 8 | (minor))\n\n")
	p("struct go_rt_layout {\n")
	p("\tint release;                       /* GO_RT_RELEASE(1, 26): the row is for go1.26.x */\n")
	p("\tconst char *version;               /* the toolchain it was made from */\n")
	for _, c := range columns {
		p("\tshort %s;%s/* %s */\n", c.name, strings.Repeat(" ", pad(28-len(c.name))), c.doc)
	}
	p("\tconst char *const *wait_reasons;   /* waitReasonStrings, by g.waitreason */\n")
	p("\tint n_wait_reasons;\n")
	p("\tconst char *const *gstatus;        /* gStatusStrings, by status without _Gscan (\"\": unused) */\n")
	p("\tint n_gstatus;\n};\n")
	for _, r := range rows {
		p("\n/* %s: runtime.waitReasonStrings, by waitReason */\n", r.version)
		p("static const char *const go_rt_wait_reasons_%s[] = {\n", cIdent(r))
		for i, s := range r.waitReasons {
			p("\t%s,%s/* %d %s */\n", cString(s), strings.Repeat(" ", pad(40-len(cString(s)))), i, r.waitNames[i])
		}
		p("};\n\nstatic const char *const go_rt_gstatus_%s[] = {", cIdent(r))
		for i, s := range r.statuses {
			if i%6 == 0 {
				p("\n\t")
			} else {
				p(" ")
			}
			p("%s,", cString(s))
		}
		p("\n};\n")
	}
	p("\nstatic const struct go_rt_layout go_rt_layouts[] = {\n")
	for _, r := range rows {
		p("\t{\n\t\t.release = GO_RT_RELEASE(%d, %d),\n\t\t.version = %s,\n", r.major, r.minor, cString(r.version))
		line := "\t\t"
		for j, c := range columns {
			item := fmt.Sprintf(".%s = %d,", c.name, r.values[j])
			if len(line)+len(item) > 90 {
				p("%s\n", strings.TrimRight(line, " "))
				line = "\t\t"
			}
			line += item + " "
		}
		p("%s\n", strings.TrimRight(line, " "))
		p("\t\t.wait_reasons = go_rt_wait_reasons_%s,\n\t\t.n_wait_reasons = %d,\n", cIdent(r), len(r.waitReasons))
		p("\t\t.gstatus = go_rt_gstatus_%s,\n\t\t.n_gstatus = %d,\n\t},\n", cIdent(r), len(r.statuses))
	}
	p("};\n\n#endif\n")
}

func pad(n int) int {
	if n < 1 {
		return 1
	}
	return n
}

func wrap(s string, width int) []string {
	var out []string
	line := ""
	for _, word := range strings.Fields(s) {
		if line != "" && len(line)+1+len(word) > width {
			out = append(out, line)
			line = ""
		}
		if line != "" {
			line += " "
		}
		line += word
	}
	return append(out, line)
}

func main() {
	out := flag.String("o", "", "write the C file here (default: standard output)")
	flag.Usage = func() {
		fmt.Fprintf(os.Stderr, "usage: gooffsets [-o FILE] BINARY=GOROOT...\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() == 0 {
		flag.Usage()
		os.Exit(2)
	}
	var rows []*row
	for _, arg := range flag.Args() {
		i := strings.LastIndex(arg, "=")
		if i < 0 {
			fmt.Fprintf(os.Stderr, "gooffsets: %q: want BINARY=GOROOT\n", arg)
			os.Exit(2)
		}
		r, err := makeRow(arg[:i], arg[i+1:])
		if err != nil {
			fmt.Fprintf(os.Stderr, "gooffsets: %v\n", err)
			os.Exit(1)
		}
		rows = append(rows, r)
	}
	sort.SliceStable(rows, func(i, j int) bool {
		return rows[i].major < rows[j].major || rows[i].major == rows[j].major && rows[i].minor < rows[j].minor
	})
	for i := 1; i < len(rows); i++ {
		if rows[i].major == rows[i-1].major && rows[i].minor == rows[i-1].minor {
			fmt.Fprintf(os.Stderr, "gooffsets: two binaries of go%d.%d\n", rows[i].major, rows[i].minor)
			os.Exit(2)
		}
	}
	for _, c := range changes(rows) {
		fmt.Fprintf(os.Stderr, "gooffsets: %s\n", c)
	}
	var buf bytes.Buffer
	emit(&buf, rows)
	if *out == "" {
		os.Stdout.Write(buf.Bytes())
	} else if err := os.WriteFile(*out, buf.Bytes(), 0o644); err != nil {
		fmt.Fprintf(os.Stderr, "gooffsets: %v\n", err)
		os.Exit(1)
	}
}
