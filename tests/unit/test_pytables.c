/* CPython 3.13 to 3.15 through their own table of offsets
 * (ptrace/runtimes/python/offsets.c): the descriptors against each
 * release's headers (py313-debugoffsets ..., built by the Makefile from
 * tests/unit/py/py_debug_offsets.c where the sid chroot of
 * scripts/runtimes.sh has them), the layouts the tables of the real
 * interpreters give against the same headers, which releases are taken and
 * which refused (pre-releases of another shape, 3.16, free-threaded
 * builds, a wrong cookie, a table that contradicts itself), and frames
 * read through a layout made from a table: markers, tagged references,
 * 3.15's sentinel frame, the parts of the eval loop the compiler split off,
 * torn chains counted. */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ptrace/runtimes/python/frames.h"
#include "ptrace/runtimes/python/interp.h"
#include "ptrace/runtimes/python/names.h"
#include "ptrace/runtimes/python/offsets.h"
#include "ptrace/runtimes/python/python.h"
#include "ptrace/space/elf.h"
#include "ptrace/space/unwinder.h"
#include "tests/harness.h"

TEST(python_version_names)
{
	char b[32];

	pt_py_version_name(0x030d00c2, b, sizeof(b));
	ASSERT_STR_EQ(b, "3.13.0rc2");
	pt_py_version_name(0x030e0af0, b, sizeof(b));
	ASSERT_STR_EQ(b, "3.14.10");
	pt_py_version_name(0x031000a1, b, sizeof(b));
	ASSERT_STR_EQ(b, "3.16.0a1");
	pt_py_version_name(0x030f00b4, b, sizeof(b));
	ASSERT_STR_EQ(b, "3.15.0b4");
}

/* ---- the headers ------------------------------------------------------- */

/* The lines "name value" a header program printed, or NULL (not built:
 * its headers missing). */
struct facts {
	char name[64][64];
	long v[64];
	int n;
};

static int facts_read(const char *prog, struct facts *f)
{
	char exe[4096], cmd[4200], line[256];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
	FILE *p;

	f->n = 0;
	ASSERT(n > 0);
	exe[n] = '\0';
	*strrchr(exe, '/') = '\0';
	snprintf(cmd, sizeof(cmd), "%s/%s", exe, prog);
	if (access(cmd, X_OK))
		return -1;
	ASSERT((p = popen(cmd, "r")));
	while (fgets(line, sizeof(line), p) && f->n < 64)
		if (sscanf(line, "%63s %ld", f->name[f->n], &f->v[f->n]) == 2)
			f->n++;
	ASSERT_EQ(pclose(p), 0);
	return 0;
}

static long fact(const struct facts *f, const char *name)
{
	for (int i = 0; i < f->n; i++)
		if (!strcmp(f->name[i], name))
			return f->v[i];
	FAIL_AT("the headers' program printed no %s", name);
	return -1;
}

static const char *const header_progs[] = { "py313-debugoffsets", "py314-debugoffsets",
					     "py315-debugoffsets" };

/* Every position a descriptor holds is the one its release's headers give,
 * and every field podprof reads is in the descriptor. */
TEST(python_tables_match_headers)
{
	char missing[64] = "";

	for (unsigned int minor = 13; minor <= 15; minor++) {
		struct facts f;
		int tables = 0;

		if (facts_read(header_progs[minor - 13], &f)) {
			snprintf(missing + strlen(missing), sizeof(missing) - strlen(missing), " 3.%u", minor);
			continue;
		}
		ASSERT_EQ(fact(&f, "version") >> 16 & 0xff, (long)minor);
		ASSERT_EQ(fact(&f, "table_size"), (long)pt_py_table_size(minor));
		for (int i = 0; i < f.n; i++) {
			if (strncmp(f.name[i], "table:", 6))
				continue;
			tables++;
			if (pt_py_table_field(minor, f.name[i] + 6) != f.v[i])
				FAIL_AT("3.%u %s: the descriptor says %d, the headers %ld", minor, f.name[i] + 6,
					pt_py_table_field(minor, f.name[i] + 6), f.v[i]);
		}
		ASSERT(tables >= 30);
		/* What podprof takes from outside the table. */
		ASSERT_EQ(fact(&f, "ts_top"), fact(&f, "ts_chunk") + 8);
		ASSERT_EQ(fact(&f, "ts_limit"), fact(&f, "ts_chunk") + 16);
		ASSERT_EQ(fact(&f, "chunk_data"), 24);
		ASSERT_EQ(fact(&f, "owner_cstack"), 3);
		ASSERT(fact(&f, "owner_below") <= fact(&f, "owner_cstack"));
		if (minor < 15)
			ASSERT_EQ(fact(&f, "str_compact_data"), fact(&f, "str_ascii_data") + 16);
		ASSERT_EQ(pt_py_table_field(minor, "thread_state.base_frame") != 0, minor >= 15);
	}
	ASSERT_EQ(pt_py_table_field(12, "thread_state.size"), -1);
	ASSERT_EQ(pt_py_table_field(16, "thread_state.size"), -1);
	ASSERT_EQ(pt_py_table_size(16), 0);
	if (missing[0])
		SKIP("not checked against the headers of%s (scripts/runtimes.sh, Makefile PY_SID)", missing);
}

/* The layout's values that the headers name the same way. */
static void check_layout_against(const struct pt_py_layout *l, const struct facts *f, const char *who)
{
	const struct { const char *name; long v; } got[] = {
		{ "rt_interp_head", l->rt_interp_head }, { "is_next", l->is_next },
		{ "is_threads_head", l->is_threads_head }, { "ts_next", l->ts_next },
		{ "ts_native_tid", l->ts_native_tid }, { "ts_current_frame", l->ts_current_frame },
		{ "ts_base_frame", l->ts_base_frame }, { "ts_chunk", l->ts_chunk }, { "ts_top", l->ts_top },
		{ "ts_limit", l->ts_limit }, { "fr_code", l->fr_code }, { "fr_previous", l->fr_previous },
		{ "fr_prev_instr", l->fr_prev_instr }, { "fr_owner", l->fr_owner },
		{ "owner_cstack", l->owner_cstack }, { "co_firstlineno", l->co_firstlineno },
		{ "co_filename", l->co_filename }, { "co_name", l->co_name }, { "co_qualname", l->co_qualname },
		{ "co_linetable", l->co_linetable }, { "co_code", l->co_code }, { "ob_type", l->ob_type },
		{ "str_length", l->str_length }, { "str_state", l->str_state },
		{ "str_ascii_data", l->str_ascii_data }, { "str_compact_data", l->str_compact_data },
		{ "bytes_size", l->bytes_size }, { "bytes_data", l->bytes_data }, { "chunk_data", l->chunk_data },
	};

	for (size_t i = 0; i < sizeof(got) / sizeof(got[0]); i++)
		if (got[i].v != fact(f, got[i].name))
			FAIL_AT("%s: %s is %ld from its table, %ld in its headers", who, got[i].name, got[i].v,
				fact(f, got[i].name));
	/* What is read of a thread state and a frame covers what is used. */
	ASSERT(l->ts_size >= l->ts_limit + 8 && l->ts_size >= l->ts_native_tid + 8);
	ASSERT(l->fr_size > l->fr_owner && l->fr_size >= l->fr_prev_instr + 8);
	ASSERT(!(l->flags & PT_PY_L_CFRAME));
}

/* The .PyRuntime section of an ELF file: its first len bytes (the table,
 * initialised data). Returns 0, or -1 if the file or section is missing. */
static int runtime_section(const char *path, uint8_t *out, size_t len)
{
	struct pt_elf e;
	struct stat st;
	uint64_t addr, off, size;
	void *img;
	int fd = open(path, O_RDONLY | O_CLOEXEC), rc = -1;

	if (fd < 0)
		return -1;
	ASSERT(!fstat(fd, &st));
	img = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
	close(fd);
	ASSERT(img != MAP_FAILED);
	if (!pt_elf_open(&e, img, (size_t)st.st_size) && !pt_elf_section(&e, ".PyRuntime", &addr, &off, &size)) {
		ASSERT(size >= len && off + len <= (uint64_t)st.st_size);
		memcpy(out, (const uint8_t *)img + off, len);
		rc = 0;
	}
	munmap(img, (size_t)st.st_size);
	return rc;
}

/* The tables the real interpreters carry give the layouts their headers
 * describe: Debian unstable's 3.13, 3.14 and 3.15 (the sid chroot), and
 * pyenv's 3.13.0 where installed. */
TEST(python_tables_of_real_interpreters)
{
	const char *runtimes = getenv("PODPROF_RUNTIMES") ? getenv("PODPROF_RUNTIMES") : "/var/cache/podprof/runtimes";
	char path[512], missing[2200] = "", why[256], who[600];
	int checked = 0;

	for (unsigned int k = 0; k < 4; k++) {
		unsigned int minor = k < 3 ? 13 + k : 13;
		uint8_t tab[PT_PY_TABLE_MAX];
		struct pt_py_layout l;
		struct facts f;
		uint32_t ver;

		if (k < 3)
			snprintf(path, sizeof(path), "%s/sid/usr/bin/python3.%u", runtimes, minor);
		else
			snprintf(path, sizeof(path), "/root/.pyenv/versions/3.13.0/lib/libpython3.13.so.1.0");
		if (facts_read(header_progs[minor - 13], &f) || runtime_section(path, tab, sizeof(tab))) {
			snprintf(missing + strlen(missing), sizeof(missing) - strlen(missing), " %s", path);
			continue;
		}
		snprintf(who, sizeof(who), "%s", path);
		ASSERT_EQ(pt_py_layout_from_table(tab, sizeof(tab), &l, &ver, why, sizeof(why)), 0);
		ASSERT_EQ(ver >> 16 & 0xff, minor);
		ASSERT_EQ(l.version, 0x0300 | minor);
		ASSERT_EQ(!!(l.flags & PT_PY_L_TAGGED), minor >= 14);
		check_layout_against(&l, &f, who);
		checked++;
	}
	if (missing[0])
		SKIP("%d checked; missing:%s (scripts/runtimes.sh, pyenv)", checked, missing);
}

/* ---- which tables are taken ------------------------------------------- */

/* A table of release `version` as its descriptor lays it out, with
 * plausible values (a synthetic layout; 3.15's sentinel frame pointer and
 * compact str size where it has them). */
static void make_table(uint8_t *tab, size_t len, uint32_t version, uint64_t free_threaded)
{
	static const struct { const char *name; uint64_t v; } vals[] = {
		{ "runtime_state.size", 4096 }, { "runtime_state.interpreters_head", 632 },
		{ "interpreter_state.size", 8192 }, { "interpreter_state.next", 7264 },
		{ "interpreter_state.threads_head", 7344 }, { "thread_state.size", 800 },
		{ "thread_state.next", 8 }, { "thread_state.current_frame", 72 },
		{ "thread_state.base_frame", 80 }, { "thread_state.native_thread_id", 160 },
		{ "thread_state.datastack_chunk", 232 }, { "interpreter_frame.size", 88 },
		{ "interpreter_frame.previous", 8 }, { "interpreter_frame.executable", 0 },
		{ "interpreter_frame.instr_ptr", 56 }, { "interpreter_frame.owner", 74 },
		{ "code_object.size", 240 }, { "code_object.filename", 112 }, { "code_object.name", 120 },
		{ "code_object.qualname", 128 }, { "code_object.linetable", 136 },
		{ "code_object.firstlineno", 68 }, { "code_object.co_code_adaptive", 208 },
		{ "pyobject.ob_type", 8 }, { "bytes_object.size", 40 }, { "bytes_object.ob_size", 16 },
		{ "bytes_object.ob_sval", 32 }, { "unicode_object.size", 80 }, { "unicode_object.state", 32 },
		{ "unicode_object.length", 16 }, { "unicode_object.asciiobject_size", 40 },
		{ "unicode_object.compactunicodeobject_size", 56 },
	};
	unsigned int minor = version >> 16 & 0xff;

	memset(tab, 0, len);
	memcpy(tab, "xdebugpy", 8);
	memcpy(tab + 8, &(uint64_t){ version }, 8);
	memcpy(tab + 16, &free_threaded, 8);
	for (size_t i = 0; i < sizeof(vals) / sizeof(vals[0]); i++) {
		int at = pt_py_table_field(minor > 15 ? 15 : minor, vals[i].name);

		if (at > 0)
			memcpy(tab + at, &vals[i].v, 8);
	}
}

TEST(python_table_acceptance)
{
	static const struct {
		uint32_t version;
		uint64_t ft;
		int err;
		const char *why;   /* a part of the reason given */
	} cases[] = {
		{ 0x030d00c2, 0, 0, "" },                  /* 3.13.0rc2: the table's final shape */
		{ 0x030d12f0, 0, 0, "" },                  /* 3.13.18 */
		{ 0x030d00c1, 0, -ENOENT, "CPython 3.13.0rc1 is a pre-release whose table of offsets podprof "
					  "does not know (it reads 3.13 from 3.13.0rc2)" },
		{ 0x030d00b3, 0, -ENOENT, "it reads 3.13 from 3.13.0rc2" },
		{ 0x030e00b2, 0, 0, "" },                  /* 3.14.0b2 */
		{ 0x030e0af0, 0, 0, "" },                  /* 3.14.10 */
		{ 0x030e00b1, 0, -ENOENT, "(it reads 3.14 from 3.14.0b2)" },
		{ 0x030f00b4, 0, 0, "" },                  /* 3.15.0b4 */
		{ 0x030f02f0, 0, 0, "" },                  /* 3.15.2 */
		{ 0x030f00b3, 0, -ENOENT, "(it reads 3.15 from 3.15.0b4)" },
		{ 0x031000a1, 0, -ENOENT, "CPython 3.16 is newer than podprof knows (it reads 3.11 to 3.15; "
					  "this is 3.16.0a1)" },
		{ 0x031002f0, 1, -ENOENT, "CPython 3.16 is newer than podprof knows" },
		{ 0x031400f0, 0, -ENOENT, "CPython 3.20 is newer than podprof knows" },
		{ 0x030d00f0, 1, -ENOTSUP, "CPython 3.13.0 is a free-threaded build (3.13t), which podprof "
					   "does not read" },
		{ 0x030e03f0, 1, -ENOTSUP, "free-threaded build (3.14t)" },
		{ 0x030e03f0, 2, -EBADMSG, "free_threaded=2" },
		{ 0x030c01f0, 0, -ENOENT, "CPython 3.12.1 has a table of offsets of a shape podprof does not know" },
		{ 0x020700f0, 0, -EBADMSG, "no CPython 3 release" },
		{ 0x030d0000, 0, -EBADMSG, "no CPython 3 release" },   /* release level 0 */
	};
	uint8_t tab[PT_PY_TABLE_MAX];
	struct pt_py_layout l;
	uint32_t ver;
	char why[256];

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int err;

		make_table(tab, sizeof(tab), cases[i].version, cases[i].ft);
		err = pt_py_layout_from_table(tab, sizeof(tab), &l, &ver, why, sizeof(why));
		if (err != cases[i].err || !strstr(why, cases[i].why))
			FAIL_AT("0x%08x ft=%llu: %d \"%s\", want %d \"%s\"", cases[i].version,
				(unsigned long long)cases[i].ft, err, why, cases[i].err, cases[i].why);
		if (!err) {
			ASSERT_EQ(ver, cases[i].version);
			ASSERT_EQ(l.version, cases[i].version >> 16);
			ASSERT_EQ(l.ts_native_tid, 160);
			ASSERT_EQ(l.ts_base_frame, (cases[i].version >> 16) >= 0x030f ? 80 : 0);
			ASSERT_EQ(l.str_compact_data, 56);
			ASSERT_EQ(l.owner_cstack, 3);
		} else {
			ASSERT_EQ(l.version, 0);   /* nothing half made */
		}
	}
	/* A wrong cookie, a table too short to hold its prefix or its fields. */
	make_table(tab, sizeof(tab), 0x030e0af0, 0);
	tab[0] = 'X';
	ASSERT_EQ(pt_py_layout_from_table(tab, sizeof(tab), &l, &ver, why, sizeof(why)), -EBADMSG);
	ASSERT(strstr(why, "does not begin with CPython's table of offsets"));
	ASSERT_EQ(ver, 0);
	make_table(tab, sizeof(tab), 0x030e0af0, 0);
	ASSERT_EQ(pt_py_layout_from_table(tab, 16, &l, &ver, why, sizeof(why)), -EBADMSG);
	ASSERT_EQ(pt_py_layout_from_table(tab, pt_py_table_size(14) - 1, &l, &ver, why, sizeof(why)), -EBADMSG);
	ASSERT_EQ(pt_py_layout_from_table(tab, pt_py_table_size(14), &l, &ver, why, sizeof(why)), 0);
}

/* Each value of the table made a lie in turn (0, too large, just past its
 * structure, all ones): refused, or taken with every offset podprof reads
 * inside its structure and inside what it reads of it. Never a layout that
 * sends a read past its buffers. */
TEST(python_table_hostile)
{
	static const uint64_t lies[] = { 0, 1, 7, 64, 87, 88, 127, 128, 511, 512, 4095, 65535, 65536,
					 1ull << 32, ~0ull };
	uint8_t tab[PT_PY_TABLE_MAX];
	struct pt_py_layout l;
	uint32_t ver;
	char why[256];

	for (unsigned int minor = 13; minor <= 15; minor++) {
		uint32_t version = 0x03000000u | minor << 16 | 0xf0;

		for (size_t at = 24; at < pt_py_table_size(minor); at += 8)
			for (size_t k = 0; k < sizeof(lies) / sizeof(lies[0]); k++) {
				make_table(tab, sizeof(tab), version, 0);
				memcpy(tab + at, &lies[k], 8);
				if (pt_py_layout_from_table(tab, sizeof(tab), &l, &ver, why, sizeof(why)))
					continue;
				ASSERT(l.ts_size <= 512 && l.fr_size <= 128 && l.co_code <= 512);
				ASSERT(l.fr_owner < l.fr_size && l.fr_code + 8 <= l.fr_size &&
				       l.fr_previous + 8 <= l.fr_size && l.fr_prev_instr + 8 <= l.fr_size);
				ASSERT(l.ts_next + 8 <= l.ts_size && l.ts_native_tid + 8 <= l.ts_size &&
				       l.ts_current_frame + 8 <= l.ts_size && l.ts_limit + 8 <= l.ts_size &&
				       l.ts_base_frame + 8 <= l.ts_size);
				ASSERT(l.co_firstlineno + 4 <= l.co_code && l.co_filename + 8 <= l.co_code &&
				       l.co_name + 8 <= l.co_code && l.co_qualname + 8 <= l.co_code &&
				       l.co_linetable + 8 <= l.co_code && l.ob_type + 8 <= l.co_code);
				ASSERT(l.str_length + 8 <= l.str_ascii_data && l.str_state + 4 <= l.str_ascii_data &&
				       l.str_ascii_data <= l.str_compact_data && l.str_compact_data <= 128);
				ASSERT(l.bytes_size + 8 <= l.bytes_data && l.bytes_data <= 64);
			}
	}
	/* Noise after a valid prefix. */
	srand(35);
	for (int round = 0; round < 2000; round++) {
		make_table(tab, sizeof(tab), 0x030f02f0, 0);
		for (size_t i = 24; i < sizeof(tab); i++)
			if (rand() % 8 == 0)
				tab[i] = (uint8_t)rand();
		if (!pt_py_layout_from_table(tab, sizeof(tab), &l, &ver, why, sizeof(why)))
			ASSERT(l.ts_size <= 512 && l.fr_size <= 128 && l.co_code <= 512 &&
			       l.str_compact_data <= 128 && l.bytes_data <= 64);
	}
}

/* ---- the eval loop's split parts ------------------------------------- */

TEST(python_jumps_out)
{
	/* At 0x1000: jmp +0x10 (inside), jne to 0x900 (outside, before), a
	 * byte pattern e9 whose target is far away, jmp to 0x900 again (once
	 * only), and a jcc cut at the end of the buffer (not read). */
	uint8_t code[32] = { 0 };
	uint64_t out[8];
	int n;

	code[0] = 0xe9;                                      /* jmp rel32 at 0x1000: to 0x1000+5+0x10 */
	memcpy(code + 1, &(int32_t){ 0x10 }, 4);
	code[5] = 0x0f;                                      /* jne rel32 at 0x1005: to 0x900 */
	code[6] = 0x85;
	memcpy(code + 7, &(int32_t){ 0x900 - 0x100b }, 4);
	code[11] = 0xe9;                                     /* jmp at 0x100b: to 0x20000000 */
	memcpy(code + 12, &(int32_t){ 0x20000000 - 0x1010 }, 4);
	code[16] = 0xe9;                                     /* jmp at 0x1010: to 0x900 again */
	memcpy(code + 17, &(int32_t){ 0x900 - 0x1015 }, 4);
	code[28] = 0x0f;                                     /* cut: 4 bytes left */
	code[29] = 0x84;
	n = pt_py_jumps_out(code, sizeof(code), 0x1000, 0x1000, 0x1020, out, 0, 8);
	ASSERT_EQ(n, 2);
	ASSERT_U64_EQ(out[0], 0x900);
	ASSERT_U64_EQ(out[1], 0x20000000);
	/* Added to what the caller has (no repeats), up to max. */
	n = pt_py_jumps_out(code, sizeof(code), 0x1000, 0x1000, 0x1020, out, 2, 8);
	ASSERT_EQ(n, 2);
	ASSERT_EQ(pt_py_jumps_out(code, sizeof(code), 0x1000, 0x1000, 0x1020, out, 0, 1), 1);
	ASSERT_EQ(pt_py_jumps_out(code, 4, 0x1000, 0x1000, 0x1020, out, 0, 8), 0);
	ASSERT_EQ(pt_py_jumps_out(NULL, 0, 0x1000, 0x1000, 0x1020, out, 0, 8), 0);
}

/* ---- frames through a layout made from a table ------------------------ */

#define IMG_BASE 0x10000000ull
#define IMG_SIZE 65536u
#define EVAL_LO 0x5000u
#define EVAL_HI 0x6000u
#define COLD_LO 0x7000u   /* a part of the eval loop split off */
#define COLD_HI 0x8000u

struct image {
	uint8_t mem[IMG_SIZE];
	uint64_t next;
};

static int image_read(void *arg, uint64_t addr, void *dst, size_t len)
{
	struct image *im = arg;

	if (addr < IMG_BASE || addr - IMG_BASE > IMG_SIZE || len > IMG_SIZE - (addr - IMG_BASE))
		return -1;
	memcpy(dst, im->mem + (addr - IMG_BASE), len);
	return 0;
}

static uint64_t alloc(struct image *im, size_t len)
{
	uint64_t a = im->next ? im->next : IMG_BASE + 64;

	im->next = (a + len + 15) & ~15ull;
	ASSERT(im->next - IMG_BASE <= IMG_SIZE);
	return a;
}

static void put64(struct image *im, uint64_t addr, uint64_t v)
{
	memcpy(im->mem + (addr - IMG_BASE), &v, 8);
}

static uint64_t str(struct image *im, const struct pt_py_layout *l, const char *s)
{
	size_t n = strlen(s);
	uint64_t a = alloc(im, l->str_ascii_data + n + 1);

	put64(im, a + l->str_length, n);
	im->mem[a - IMG_BASE + l->str_state] = (1 << 2) | (1 << 5) | (1 << 6);   /* compact ASCII */
	memcpy(im->mem + (a - IMG_BASE) + l->str_ascii_data, s, n);
	return a;
}

/* A code object of file `file` whose first 8 code units are on line
 * firstlineno + 2. */
static uint64_t code_in(struct image *im, const struct pt_py_layout *l, uint64_t type, const char *name,
			const char *file, int firstlineno)
{
	static const uint8_t lt[] = { 0x80 | (13 << 3) | 7, 4 };
	uint64_t c = alloc(im, l->co_code + 16), b = alloc(im, l->bytes_data + 8);

	put64(im, b + l->bytes_size, sizeof(lt));
	memcpy(im->mem + (b - IMG_BASE) + l->bytes_data, lt, sizeof(lt));
	put64(im, c + l->ob_type, type);
	memcpy(im->mem + (c - IMG_BASE) + l->co_firstlineno, &firstlineno, 4);
	put64(im, c + l->co_name, str(im, l, name));
	put64(im, c + l->co_qualname, str(im, l, name));
	put64(im, c + l->co_filename, str(im, l, file));
	put64(im, c + l->co_linetable, b);
	return c;
}

static uint64_t code(struct image *im, const struct pt_py_layout *l, uint64_t type, const char *name,
		     int firstlineno)
{
	return code_in(im, l, type, name, "/app/m.py", firstlineno);
}

/* A frame of code (its executable tagged as 3.14 tags a reference) at code
 * unit `unit`, or a marker (code 0) of owner `owner`. */
static uint64_t frame(struct image *im, const struct pt_py_layout *l, uint64_t co, int unit, int owner,
		      uint64_t previous)
{
	uint64_t f = alloc(im, 96);

	put64(im, f + l->fr_code, (l->flags & PT_PY_L_TAGGED) ? co | 1 : co);
	put64(im, f + l->fr_prev_instr, co + l->co_code + 2 * (uint64_t)unit);
	put64(im, f + l->fr_previous, previous);
	im->mem[f - IMG_BASE + l->fr_owner] = (uint8_t)owner;
	return f;
}

TEST(python_frames_from_a_table)
{
	static const uint32_t versions[] = { 0x030d12f0, 0x030e0af0, 0x030f02f0 };

	for (size_t v = 0; v < 3; v++) {
		struct image *im = calloc(1, sizeof(*im));
		struct pt_py_cap *pc = calloc(1, sizeof(*pc));
		uint8_t tab[PT_PY_TABLE_MAX];
		struct pt_py_layout l;
		struct pt_py_line ln[8];
		struct pt_py_stats st;
		struct pt_capture cap;
		struct pt_py *py;
		uint64_t runtime, interp, type, inner, outer, mod, shim, ts, base = 0, f0, fs, f1, m1, f2, m2;
		uint64_t tstates[1] = { 0 };
		uint64_t frames[] = { 0x1000, EVAL_LO + 5, 0x2000, COLD_LO + 9, 0x3000 };
		pid_t nstids[1] = { 4242 };
		uint32_t ver;
		char why[256];

		ASSERT(im && pc);
		make_table(tab, sizeof(tab), versions[v], 0);
		ASSERT_OK(pt_py_layout_from_table(tab, sizeof(tab), &l, &ver, why, sizeof(why)));
		runtime = alloc(im, 1024);
		interp = alloc(im, 7400);
		type = alloc(im, 16);
		ts = alloc(im, 800);
		inner = code(im, &l, type, "Klass.inner", 10);
		outer = code(im, &l, type, "outer", 30);
		mod = code(im, &l, type, "<module>", 1);
		shim = code_in(im, &l, type, "__init__", "__init__", 1);
		/* 3.15: every chain ends at the thread's sentinel frame. */
		if (l.ts_base_frame) {
			base = frame(im, &l, 0, 0, 3, 0);
			put64(im, ts + l.ts_base_frame, base);
		}
		/* <module> in the outer eval call, outer and inner in the inner
		 * one (between them the interpreter's __init__ shim, not
		 * shown); each call's marker below its frames (owner 3, or 4:
		 * 3.14's C-stack owner, also a marker). */
		m2 = frame(im, &l, 0, 0, v == 1 ? 4 : 3, base);
		f2 = frame(im, &l, mod, 3, 0, m2);
		m1 = frame(im, &l, 0, 0, 3, f2);
		f1 = frame(im, &l, outer, 0, 0, m1);
		fs = frame(im, &l, shim, 0, 0, f1);
		f0 = frame(im, &l, inner, 5, 0, fs);
		put64(im, runtime + l.rt_interp_head, interp);
		put64(im, interp + l.is_threads_head, ts);
		put64(im, ts + l.ts_native_tid, 4242);
		put64(im, ts + l.ts_current_frame, f0);

		ASSERT_OK(pt_py_new(&py, 1, NULL));
		pt_py_set_reader(py, image_read, im);
		ASSERT_OK(pt_py_activate(py, &l, ver, runtime, EVAL_LO, EVAL_HI, type));
		ASSERT_OK(pt_py_add_eval_part(py, COLD_LO, COLD_HI));
		ASSERT_EQ(pt_py_find_threads(py, nstids, tstates, 1), 1);
		ASSERT_U64_EQ(tstates[0], ts);
		memset(&cap, 0, sizeof(cap));
		cap.regs.rsp = 0x7fff0000;
		ASSERT_OK(pt_py_capture(py, ts, 4242, NULL, &cap, pc));
		ASSERT_EQ(pc->n, 6);                 /* the sentinel is not a frame */
		ASSERT_EQ(pc->truncated, 0);
		ASSERT_U64_EQ(pc->f[0].code, inner);   /* the tag cleared */
		pt_py_merge(py, pc, frames, 5);
		ASSERT(pt_py_is_token(frames[1]));
		ASSERT(pt_py_is_token(frames[3]));   /* in the split-off part */
		ASSERT_EQ(pt_py_lines(py, frames[1], ln, 8), 2);
		ASSERT_STR_EQ(ln[0].func, "Klass.inner");
		ASSERT_EQ(ln[0].line, 12);
		ASSERT_STR_EQ(ln[1].func, "outer");
		ASSERT_EQ(ln[1].line, 32);
		ASSERT_EQ(pt_py_lines(py, frames[3], ln, 8), 1);
		ASSERT_STR_EQ(ln[0].func, "<module>");
		ASSERT_STR_EQ(ln[0].file, "/app/m.py");
		pt_py_stats(py, &st);
		ASSERT_U64_EQ(st.merged, 1);
		ASSERT_U64_EQ(st.torn, 0);

		/* Torn: the chain leads to memory that cannot be read. The
		 * frames read go to the innermost eval call, the outer one
		 * stays native, and the sample is counted as lacking frames. */
		put64(im, f1 + l.fr_previous, 0xdead0000);
		ASSERT_OK(pt_py_capture(py, ts, 4242, NULL, &cap, pc));
		ASSERT_EQ(pc->truncated, 1);
		{
			uint64_t fr[] = { EVAL_LO + 5, COLD_LO + 9 };

			pt_py_merge(py, pc, fr, 2);
			ASSERT(pt_py_is_token(fr[0]));
			ASSERT_U64_EQ(fr[1], COLD_LO + 9);
		}
		pt_py_stats(py, &st);
		ASSERT_U64_EQ(st.merged, 2);
		ASSERT_U64_EQ(st.torn, 1);
		/* 3.15: a chain ending before its sentinel is cut short too. */
		put64(im, f1 + l.fr_previous, 0);
		ASSERT_OK(pt_py_capture(py, ts, 4242, NULL, &cap, pc));
		ASSERT_EQ(pc->n, 3);
		ASSERT_EQ(pc->truncated, !!l.ts_base_frame);
		/* A code object that is not one: that eval call stays native,
		 * the sample counted. */
		put64(im, f1 + l.fr_previous, m1);
		put64(im, f0 + l.fr_code, mod + 8);
		ASSERT_OK(pt_py_capture(py, ts, 4242, NULL, &cap, pc));
		{
			uint64_t fr[] = { EVAL_LO + 5, COLD_LO + 9 };

			pt_py_merge(py, pc, fr, 2);
			ASSERT_U64_EQ(fr[0], EVAL_LO + 5);
			ASSERT(pt_py_is_token(fr[1]));
		}
		pt_py_stats(py, &st);
		ASSERT_U64_EQ(st.torn, 2);
		pt_py_free(py);
		free(pc);
		free(im);
	}
}
