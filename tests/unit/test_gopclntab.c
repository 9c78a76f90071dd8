/* The .gopclntab parser: the committed synthetic tables of each layout
 * (tests/fuzz/make_gopclntab_seeds.py), the gohot fixture built by Debian's
 * Go against its own .symtab, and hostile variants of both. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ptrace/space/elf.h"
#include "ptrace/space/gopclntab.h"
#include "tests/harness.h"

#define VADDR 0x400000u
#define TEXT 0x401000u

/* The whole of a file, or NULL (*len 0). */
static uint8_t *slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	uint8_t *buf = NULL;
	long n;

	*len = 0;
	if (!f)
		return NULL;
	if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) > 0 && fseek(f, 0, SEEK_SET) == 0 &&
	    (buf = malloc((size_t)n)) && fread(buf, 1, (size_t)n, f) == (size_t)n)
		*len = (size_t)n;
	fclose(f);
	if (!*len) {
		free(buf);
		buf = NULL;
	}
	return buf;
}

static void check_seed(const char *file, int ver)
{
	char rel[256], path[4400];
	struct pt_goline lines[8];
	struct pt_gotab *g;
	struct pt_gofunc f;
	size_t len;
	uint8_t *img;
	int32_t d;

	/* A committed seed (tests/fuzz/corpus/gopclntab), found from any directory. */
	snprintf(rel, sizeof(rel), "tests/fuzz/corpus/gopclntab/%s", file);
	img = slurp(harness_src(rel, path, sizeof(path)), &len);
	if (!img)
		FAIL_AT("%s missing or empty (a committed seed)", path);
	ASSERT_EQ(pt_gotab_scan(img, len, VADDR, TEXT, TEXT + 0x1000), 0x300);
	ASSERT_OK(pt_gotab_new(&g, img, len, VADDR, 0x300, len - 0x300, 0));
	ASSERT_EQ(pt_gotab_version(g), ver);
	ASSERT_OK(pt_gotab_find_gofunc(g, img, len, VADDR, 0));
	ASSERT(pt_gotab_has_inline(g));
	ASSERT_EQ(pt_gotab_lookup(g, TEXT - 1, &f), -ENOENT);
	ASSERT_EQ(pt_gotab_lookup(g, TEXT + 0xc0, &f), -ENOENT);
	ASSERT_OK(pt_gotab_lookup(g, TEXT + 0x3f, &f));
	ASSERT_STR_EQ(f.name, "main.a");
	ASSERT_OK(pt_gotab_lookup(g, TEXT + 0x40, &f));
	ASSERT_STR_EQ(f.name, "main.b");
	ASSERT_U64_EQ(f.entry, TEXT + 0x40);
	ASSERT_U64_EQ(f.end, TEXT + 0x80);
	/* pcsp: 0 at the entry, 0x18 in the body, 0 at the last 4 bytes. */
	ASSERT_OK(pt_gotab_spdelta(g, &f, TEXT + 0x40, &d));
	ASSERT_EQ(d, 0);
	ASSERT_OK(pt_gotab_spdelta(g, &f, TEXT + 0x44, &d));
	ASSERT_EQ(d, 0x18);
	ASSERT_OK(pt_gotab_spdelta(g, &f, TEXT + 0x7c, &d));
	ASSERT_EQ(d, 0);
	/* main.inl is inlined at [0x10, 0x20) of main.b, nowhere else. */
	/* (the frames there: the inlined ones, then main.b's own) */
	ASSERT_EQ(pt_gotab_frames(g, &f, TEXT + 0x4f, lines, 8) - 1, 0);
	ASSERT_EQ(pt_gotab_frames(g, &f, TEXT + 0x50, lines, 8) - 1, 1);
	ASSERT_STR_EQ(lines[0].name, "main.inl");
	ASSERT_EQ(pt_gotab_frames(g, &f, TEXT + 0x5f, lines, 8) - 1, 1);
	ASSERT_EQ(pt_gotab_frames(g, &f, TEXT + 0x60, lines, 8) - 1, 0);
	ASSERT_OK(pt_gotab_lookup(g, TEXT + 0x80, &f));
	ASSERT_STR_EQ(f.name, "runtime.goexit");
	if (ver >= 118)
		ASSERT_EQ(f.flag & PT_GOFUNC_TOPFRAME, PT_GOFUNC_TOPFRAME);
	pt_gotab_free(g);
	free(img);
}

TEST(gopclntab_go116_layout) { check_seed("go116", 116); }
TEST(gopclntab_go118_layout) { check_seed("go118", 118); }
TEST(gopclntab_go120_layout) { check_seed("go120", 120); }

/* Every cut of a table, and every byte of its header and first records
 * flipped, parses or fails cleanly (ASan watches the reads). */
TEST(gopclntab_hostile_variants)
{
	struct pt_goline lines[PT_GOTAB_MAX_INLINE + 1];
	size_t len;
	char path[4200];
	uint8_t *img = slurp(harness_src("tests/fuzz/corpus/gopclntab/go118", path, sizeof(path)), &len), *bad;

	if (!img)
		FAIL_AT("%s missing or empty (a committed seed)", path);
	for (size_t cut = 0x300; cut <= len; cut++) {
		struct pt_gotab *g;
		struct pt_gofunc f;
		int32_t d;

		bad = malloc(cut);
		memcpy(bad, img, cut);
		if (pt_gotab_new(&g, bad, cut, VADDR, 0x300, cut - 0x300, 0) == 0) {
			pt_gotab_find_gofunc(g, bad, cut, VADDR, 0);
			for (uint64_t pc = TEXT; pc < TEXT + 0xc0; pc += 3)
				if (pt_gotab_lookup(g, pc, &f) == 0) {
					pt_gotab_spdelta(g, &f, pc, &d);
					pt_gotab_frames(g, &f, pc, lines, PT_GOTAB_MAX_INLINE + 1);
				}
			pt_gotab_free(g);
		}
		free(bad);
	}
	bad = malloc(len);
	for (size_t i = 0; i < len; i++) {
		struct pt_gotab *g;
		struct pt_gofunc f;
		int32_t d;

		memcpy(bad, img, len);
		bad[i] ^= 0xa5;
		if (pt_gotab_new(&g, bad, len, VADDR, 0x300, len - 0x300, 0) == 0) {
			pt_gotab_find_gofunc(g, bad, len, VADDR, 0);
			for (uint64_t pc = TEXT; pc < TEXT + 0xc0; pc += 5)
				if (pt_gotab_lookup(g, pc, &f) == 0) {
					pt_gotab_spdelta(g, &f, pc, &d);
					pt_gotab_frames(g, &f, pc, lines, PT_GOTAB_MAX_INLINE + 1);
				}
			pt_gotab_free(g);
		}
	}
	free(bad);
	free(img);
}

/* The gohot fixture beside this test binary (build/<flavour>/fixtures), read
 * whole; fails the test when it is not built (make fixtures: Go is a
 * declared dependency, scripts/packages.txt). */
static uint8_t *gohot(size_t *len)
{
	char self[4096], path[4200];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	uint8_t *img;

	ASSERT(n > 0);
	self[n] = '\0';
	*strrchr(self, '/') = '\0';
	snprintf(path, sizeof(path), "%s/fixtures/gohot", self);
	if (!(img = slurp(path, len)))
		FAIL_AT("%s not built (make fixtures)", path);
	return img;
}

/* gohot, built by Debian's Go: every Go function .symtab names is the
 * function .gopclntab finds at its address, with its name. */
TEST(gopclntab_agrees_with_symtab_of_gohot)
{
	struct pt_symtab st = { 0 };
	uint64_t addr, off, size, lo, hi;
	struct pt_gotab *g;
	struct pt_elf e;
	size_t len, checked = 0;
	uint8_t *img = gohot(&len);

	ASSERT_OK(pt_elf_open(&e, img, len));
	ASSERT_OK(pt_elf_section(&e, ".gopclntab", &addr, &off, &size));
	ASSERT_OK(pt_gotab_new(&g, img + off, size, addr, 0, size, 0));
	ASSERT_EQ(pt_gotab_version(g), 118);
	pt_gotab_range(g, &lo, &hi);
	ASSERT(pt_elf_add_symbols(&e, &st) > 1000);
	ASSERT_OK(pt_symtab_finish(&st));
	for (size_t i = 0; i < st.n; i++) {
		const char *name = st.names + st.v[i].name;
		struct pt_gofunc f;

		if (st.v[i].addr < lo || st.v[i].addr >= hi || !st.v[i].size)
			continue;
		ASSERT_OK(pt_gotab_lookup(g, st.v[i].addr + st.v[i].size / 2, &f));
		ASSERT_U64_EQ(f.entry, st.v[i].addr);
		/* The names of the fixture's and the runtime's functions agree
		 * (.symtab spells ABI wrappers name.abi0, generated functions
		 * with other punctuation). */
		if ((!strncmp(name, "main.", 5) || !strncmp(name, "runtime.", 8)) &&
		    strncmp(f.name, name, strlen(f.name)))
			FAIL_AT("%#llx: .symtab %s, .gopclntab %s", (unsigned long long)st.v[i].addr, name,
				f.name);
		checked++;
	}
	ASSERT(checked > 1000);
	pt_symtab_free(&st);
	pt_gotab_free(g);
	free(img);
}

/* The line of tests/fixtures/gohot/main.go that starts with `text` (after
 * tabs), counting from 1, or 0. */
static int source_line(const char *text, int after)
{
	char path[4200];
	FILE *f = fopen(harness_src("tests/fixtures/gohot/main.go", path, sizeof(path)), "r");
	char buf[512];
	int no = 0, found = 0;

	if (!f)
		return 0;
	while (!found && fgets(buf, sizeof(buf), f)) {
		const char *s = buf;

		no++;
		while (*s == '\t')
			s++;
		if (no > after && !strncmp(s, text, strlen(text)))
			found = no;
	}
	fclose(f);
	return found;
}

/* gohot's files and lines, as Go's traceback gives them: a function's entry
 * is on its func line (or its first statement's); where main.scramble is inlined into main.crunchAlpha,
 * two frames: scramble on a line of its body, crunchAlpha on its call. */
TEST(gopclntab_lines_of_gohot)
{
	struct pt_symtab st = { 0 };
	uint64_t addr, off, size, ro_addr, ro_off, ro_size, d_addr, d_off, d_size;
	int leaf_line = source_line("func leafAlpha(", 0), crunch = source_line("func crunchAlpha(", 0);
	int scr = source_line("func scramble(", 0), call = source_line("x = scramble(x)", crunch);
	int seen_inline = 0, want;
	struct pt_goline gl[8];
	struct pt_gotab *g;
	struct pt_elf e;
	size_t len;
	uint8_t *img = gohot(&len);

	if (!leaf_line || !crunch || !scr || !call)
		FAIL_AT("tests/fixtures/gohot/main.go unreadable, or a line it names is gone");
	ASSERT_OK(pt_elf_open(&e, img, len));
	/* The table with go:func.* (in .rodata, before it in the same
	 * segment) and runtime.firstmoduledata (.noptrdata), for the inline
	 * trees of Go 1.18+. */
	ASSERT_OK(pt_elf_section(&e, ".gopclntab", &addr, &off, &size));
	ASSERT_OK(pt_elf_section(&e, ".rodata", &ro_addr, &ro_off, &ro_size));
	ASSERT_OK(pt_elf_section(&e, ".noptrdata", &d_addr, &d_off, &d_size));
	ASSERT(ro_off < off && addr - ro_addr == off - ro_off);
	ASSERT_OK(pt_gotab_new(&g, img + ro_off, off + size - ro_off, ro_addr, off - ro_off, size, 0));
	ASSERT_OK(pt_gotab_find_gofunc(g, img + d_off, d_size, d_addr, 0));
	ASSERT(pt_elf_add_symbols(&e, &st) > 1000);
	ASSERT_OK(pt_symtab_finish(&st));
	for (size_t i = 0; i < st.n; i++) {
		const char *name = st.names + st.v[i].name;
		struct pt_gofunc f;

		if (strcmp(name, "main.leafAlpha") && strcmp(name, "main.crunchAlpha"))
			continue;
		ASSERT_OK(pt_gotab_lookup(g, st.v[i].addr, &f));
		ASSERT_EQ(pt_gotab_frames(g, &f, f.entry, gl, 8), 1);
		ASSERT_STR_EQ(gl[0].name, name);
		ASSERT(gl[0].file && strstr(gl[0].file, "/gohot/main.go"));
		/* On the func line (the prologue), or the first statement's
		 * for a frameless leaf, which has no prologue. */
		want = name[5] == 'l' ? leaf_line : crunch;
		if (gl[0].line != want && gl[0].line != want + 1)
			FAIL_AT("%s's entry on line %d, its func on %d", name, gl[0].line, want);
		for (uint64_t pc = f.entry; pc < f.end; pc++) {
			int k = pt_gotab_frames(g, &f, pc, gl, 8);

			ASSERT(k >= 1);
			if (k == 1)
				continue;
			ASSERT_EQ(k, 2);
			ASSERT_STR_EQ(gl[0].name, "main.scramble");
			ASSERT(gl[0].line > scr && gl[0].line < scr + 6);
			ASSERT_STR_EQ(gl[1].name, "main.crunchAlpha");
			ASSERT_EQ(gl[1].line, call);
			seen_inline++;
		}
		/* The frames fit what the caller asked for. */
		ASSERT_EQ(pt_gotab_frames(g, &f, f.entry, gl, 0), 0);
	}
	ASSERT(seen_inline > 0);
	pt_symtab_free(&st);
	pt_gotab_free(g);
	free(img);
}
