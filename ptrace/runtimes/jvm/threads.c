/* Java threads' names (see threads.h). The JVM's thread list is an array
 * of JavaThread* (ThreadsSMRSupport::_java_thread_list); each has its
 * OSThread (the kernel tid, as the target's PID namespace numbers it) and
 * a handle to its java.lang.Thread. The name is a field of that object, a
 * String, whose bytes are a byte[] and whose coder says Latin-1 or
 * UTF-16. Where the fields lie comes from each class's field records: up
 * to JDK 20 six u2 per field (access flags, name and signature indices,
 * initial value, and the offset packed with a tag: bit 0 set when it is
 * one, the offset from bit 2); from 21 a stream of UNSIGNED5 numbers (the
 * counts of Java and injected fields, then per field its name, signature,
 * offset, access flags and flags, and one more number for each of the
 * flags 0, 2 and 4 set). References are compressed (a base and a shift)
 * unless the heap is too large; a byte[]'s length and bytes follow its
 * header, whose size the object header flags decide. Facts from HotSpot's
 * fieldInfo.hpp, javaClasses.cpp, arrayOop.hpp and compressedOops of 17,
 * 21 and 25. The heap moves under a garbage collector: every value is
 * checked, and a name that cannot be read is the kernel's.
 * Sampler thread only, but for pt_jvm_string_utf8. */
#include "ptrace/runtimes/jvm/threads.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "base/array.h"
#include "base/mem.h"
#include "ptrace/core/internal.h"
#include "ptrace/runtimes/jvm/methods.h"
#include "ptrace/runtimes/jvm/state.h"
#include "ptrace/runtimes/jvm/vmstructs.h"

#define RECHECK_NS 1000000000ull        /* names read again after this */
#define LAYOUT_RETRY_NS 10000000000ull  /* a layout not found is looked for again */
#define MAX_THREADS 16384u
#define MAX_FLAGS 4096u
#define MAX_FIELD_BYTES (16u << 10)
#define MAX_CHARS 256u                  /* of a name read (more is cut) */
#define NAME 64                         /* bytes of a name kept */
#define ACC_STATIC 0x0008u
#define ACC_FIELD_INTERNAL 0x0400u      /* 17: a field the JVM injected */
#define FF_INJECTED 0x2u                /* 21 on */

struct tname {
	pid_t tid;
	char name[NAME];
};

struct pt__jvm_names {
	int layout;              /* 1: known; -1: not to be had (yet) */
	uint64_t layout_ns;
	int narrow;              /* references of 4 bytes */
	uint64_t base;
	unsigned int shift;
	uint32_t name_off, value_off, coder_off;   /* Thread.name, String.value, .coder */
	uint32_t len_off, data_off;                /* a byte[]'s length and bytes */
	uint64_t read_ns;
	struct tname *v;
	size_t n, cap;
};

void pt__jvm_threads_reset(struct pt_jvm *j)
{
	if (j->names)
		base_free(j->names->v);
	base_free(j->names);
	j->names = NULL;
}

/* ---- text ------------------------------------------------------------------------- */

static size_t put_utf8(char *out, size_t o, size_t cap, uint32_t c)
{
	uint8_t b[4];
	size_t n;

	if (c < 0x20 || c == 0x7f)
		c = '?';
	if (c < 0x80) {
		b[0] = (uint8_t)c;
		n = 1;
	} else if (c < 0x800) {
		b[0] = (uint8_t)(0xc0 | c >> 6);
		b[1] = (uint8_t)(0x80 | (c & 0x3f));
		n = 2;
	} else if (c < 0x10000) {
		b[0] = (uint8_t)(0xe0 | c >> 12);
		b[1] = (uint8_t)(0x80 | ((c >> 6) & 0x3f));
		b[2] = (uint8_t)(0x80 | (c & 0x3f));
		n = 3;
	} else {
		b[0] = (uint8_t)(0xf0 | c >> 18);
		b[1] = (uint8_t)(0x80 | ((c >> 12) & 0x3f));
		b[2] = (uint8_t)(0x80 | ((c >> 6) & 0x3f));
		b[3] = (uint8_t)(0x80 | (c & 0x3f));
		n = 4;
	}
	if (o + n + 1 > cap)
		return 0;
	memcpy(out + o, b, n);
	return n;
}

int pt_jvm_string_utf8(const uint8_t *s, size_t n, int coder, char *out, size_t cap)
{
	size_t o = 0, w;

	if (!cap || (coder != 0 && coder != 1) || (coder == 1 && n % 2))
		return -1;
	for (size_t i = 0; i < n; i += coder ? 2 : 1) {
		uint32_t c = coder ? (uint32_t)(s[i] | s[i + 1] << 8) : s[i];

		if (coder && c >= 0xd800 && c < 0xdc00 && i + 3 < n) {
			uint32_t lo = (uint32_t)(s[i + 2] | s[i + 3] << 8);

			if (lo >= 0xdc00 && lo < 0xe000) {
				c = 0x10000 + ((c - 0xd800) << 10) + (lo - 0xdc00);
				i += 2;
			}
		}
		if (c >= 0xd800 && c < 0xe000)
			c = 0xfffd;   /* a lone surrogate */
		if (!(w = put_utf8(out, o, cap, c)))
			break;
		o += w;
	}
	out[o] = 0;
	return (int)o;
}

/* ---- the heap's layout ---------------------------------------------------------------- */

static int static_word(struct pt_jvm *j, enum pt__jvm_f f, uint64_t *v)
{
	return j->f[f].found ? pt__jvm_word(j, j->f[f].v, v) : -ENOENT;
}

/* The JVM's flags UseCompressedOops, UseCompressedClassPointers and
 * UseCompactObjectHeaders (25 on) into v[0..3) (-1: no such flag). */
static int flags(struct pt_jvm *j, int *v)
{
	static const char *const names[3] = { "UseCompressedOops", "UseCompressedClassPointers",
					      "UseCompactObjectHeaders" };
	uint64_t arr, n, sz = j->tsize[JT_FLAG];
	uint8_t *buf;

	v[0] = v[1] = v[2] = -1;
	if (static_word(j, JF_S_FLAGS, &arr) || static_word(j, JF_S_NFLAGS, &n) || !j->f[JF_FLAG_NAME].found ||
	    !j->f[JF_FLAG_ADDR].found || n > MAX_FLAGS || sz < 16 || sz > 256 ||
	    j->f[JF_FLAG_NAME].v + 8 > sz || j->f[JF_FLAG_ADDR].v + 8 > sz)
		return -EFAULT;
	if (!(buf = base_malloc(n * sz)))
		return -ENOMEM;
	if (pt__jvm_read(j, arr, buf, n * sz)) {
		base_free(buf);
		return -EFAULT;
	}
	for (uint64_t i = 0; i < n; i++) {
		const uint8_t *e = buf + i * sz;
		char name[40];
		uint8_t b;

		if (pt__jvm_cstr(j, pt__rd64(e + j->f[JF_FLAG_NAME].v), name, sizeof(name)) < 0)
			continue;
		for (int k = 0; k < 3; k++)
			if (!strcmp(name, names[k]) && !pt__jvm_read(j, pt__rd64(e + j->f[JF_FLAG_ADDR].v), &b, 1))
				v[k] = b != 0;
	}
	base_free(buf);
	return 0;
}

/* 17-20: the offset of instance field `want` of klass. */
static int field_records(struct pt_jvm *j, uint64_t klass, uint64_t cp, const char *want, uint32_t *off)
{
	uint8_t head[8], rec[12 * 128];
	uint64_t arr;
	int64_t n;
	char name[64];

	if (pt__jvm_word(j, klass + j->f[JF_IK_FIELDS].v, &arr) ||
	    pt__jvm_read(j, klass + j->f[JF_IK_NFIELDS].v, head, 2))
		return -EFAULT;
	n = pt__jvm_int(head, sizeof(head), 0, 2, 0);
	/* Array<u2>: an int length, then the shorts */
	if (n <= 0 || n > 128 || pt__jvm_read(j, arr + 4, rec, (size_t)n * 12))
		return -EFAULT;
	for (int64_t i = 0; i < n; i++) {
		const uint8_t *r = rec + i * 12;
		uint32_t acc = r[0] | r[1] << 8, idx = r[2] | r[3] << 8;
		uint32_t packed = (uint32_t)(r[8] | r[9] << 8) | (uint32_t)(r[10] | r[11] << 8) << 16;

		if ((acc & (ACC_STATIC | ACC_FIELD_INTERNAL)) || !(packed & 1) ||
		    pt__jvm_pool_symbol(j, cp, idx, name, sizeof(name)) < 0 || strcmp(name, want))
			continue;
		*off = packed >> 2;
		return 0;
	}
	return -ENOENT;
}

/* 21 on: the same from the class's field stream. */
static int field_stream(struct pt_jvm *j, uint64_t klass, uint64_t cp, const char *want, uint32_t *off)
{
	uint8_t *s = NULL;
	uint64_t arr;
	int32_t n;
	uint32_t nj, ni, v[5], skip;
	size_t i = 0;
	char name[64];
	int err = -ENOENT;

	if (pt__jvm_word(j, klass + j->f[JF_IK_FIELDSTREAM].v, &arr) || pt__jvm_read(j, arr, &n, 4) ||
	    n <= 0 || (uint32_t)n > MAX_FIELD_BYTES)
		return -EFAULT;
	if (!(s = base_malloc((size_t)n)))
		return -ENOMEM;
	/* Array<u1>: an int length, then the bytes */
	if (pt__jvm_read(j, arr + 4, s, (size_t)n) || pt_jvm_u5(s, (size_t)n, &i, j->ux, &nj) ||
	    pt_jvm_u5(s, (size_t)n, &i, j->ux, &ni)) {
		err = -EFAULT;
		goto out;
	}
	for (uint32_t f = 0; f < nj && f < 4096; f++) {
		for (int k = 0; k < 5; k++)
			if (pt_jvm_u5(s, (size_t)n, &i, j->ux, &v[k]))
				goto out;
		/* the optional numbers its flags announce */
		for (int bit = 0; bit <= 4; bit += 2)
			if ((v[4] & (1u << bit)) && pt_jvm_u5(s, (size_t)n, &i, j->ux, &skip))
				goto out;
		if ((v[3] & ACC_STATIC) || (v[4] & FF_INJECTED) ||
		    pt__jvm_pool_symbol(j, cp, v[0], name, sizeof(name)) < 0 || strcmp(name, want))
			continue;
		*off = v[2];
		err = 0;
		goto out;
	}
out:
	base_free(s);
	return err;
}

static int field_offset(struct pt_jvm *j, enum pt__jvm_f klass_static, const char *want, uint32_t *off)
{
	uint64_t klass, cp;

	if (static_word(j, klass_static, &klass) || !klass ||
	    pt__jvm_word(j, klass + j->f[JF_IK_CONSTANTS].v, &cp))
		return -EFAULT;
	if (j->f[JF_IK_FIELDSTREAM].found)
		return field_stream(j, klass, cp, want, off);
	if (j->f[JF_IK_FIELDS].found && j->f[JF_IK_NFIELDS].found)
		return field_records(j, klass, cp, want, off);
	return -ENOENT;
}

static int find_layout(struct pt_jvm *j, struct pt__jvm_names *L)
{
	static const enum pt__jvm_f need[] = { JF_S_THREADS, JF_TL_LENGTH, JF_TL_THREADS, JF_JT_OSTHREAD,
					       JF_OS_TID, JF_JT_OBJ, JF_OH_OBJ };
	int fl[3];
	uint64_t shift = 0;

	for (size_t i = 0; i < sizeof(need) / sizeof(need[0]); i++)
		if (!j->f[need[i]].found)
			return -ENOENT;
	if (flags(j, fl) || fl[0] < 0 || field_offset(j, JF_S_THREAD_KLASS, "name", &L->name_off) ||
	    field_offset(j, JF_S_STRING_KLASS, "value", &L->value_off) ||
	    field_offset(j, JF_S_STRING_KLASS, "coder", &L->coder_off))
		return -ENOENT;
	L->narrow = fl[0];
	if (L->narrow && (static_word(j, JF_S_OOP_BASE, &L->base) || static_word(j, JF_S_OOP_SHIFT, &shift)))
		return -ENOENT;
	L->shift = (unsigned int)(shift & 0xffffffffu);
	if (L->shift > 8)
		return -EBADMSG;
	/* A byte[]: its header (a mark word, then its class: compressed, or
	 * in the mark word with compact headers), its length, its bytes
	 * (aligned to 8 bytes up to JDK 21, not from 22). */
	if (fl[2] == 1) {
		L->len_off = 8;
		L->data_off = 12;
	} else if (fl[1] != 0) {
		L->len_off = 12;
		L->data_off = 16;
	} else {
		L->len_off = 16;
		L->data_off = j->major >= 22 ? 20 : 24;
	}
	return 0;
}

/* ---- the names ----------------------------------------------------------------------------- */

/* The reference at addr (a field of an object). */
static int ref(struct pt_jvm *j, const struct pt__jvm_names *L, uint64_t addr, uint64_t *out)
{
	uint32_t n;

	if (!L->narrow)
		return pt__jvm_word(j, addr, out) || !*out ? -EFAULT : 0;
	if (pt__jvm_read(j, addr, &n, sizeof(n)) || !n)
		return -EFAULT;
	*out = L->base + ((uint64_t)n << L->shift);
	return 0;
}

static int java_name(struct pt_jvm *j, const struct pt__jvm_names *L, uint64_t jt, char *out, size_t cap)
{
	uint8_t chars[2 * MAX_CHARS], coder;
	uint64_t slot, obj, str, arr;
	int32_t len;

	if (pt__jvm_word(j, jt + j->f[JF_JT_OBJ].v + j->f[JF_OH_OBJ].v, &slot) || pt__jvm_word(j, slot, &obj) ||
	    !obj || ref(j, L, obj + L->name_off, &str) || pt__jvm_read(j, str + L->coder_off, &coder, 1) ||
	    coder > 1 || ref(j, L, str + L->value_off, &arr) || pt__jvm_read(j, arr + L->len_off, &len, 4) ||
	    len <= 0)
		return -EFAULT;
	if ((uint32_t)len > sizeof(chars))
		len = (int32_t)sizeof(chars) & ~1;   /* cut: a character's whole */
	if (pt__jvm_read(j, arr + L->data_off, chars, (size_t)len))
		return -EFAULT;
	return pt_jvm_string_utf8(chars, (size_t)len, coder, out, cap) > 0 ? 0 : -EBADMSG;
}

static void read_names(struct pt_jvm *j, struct pt__jvm_names *L)
{
	uint64_t list, arr, *jts = NULL;
	uint32_t n;

	L->n = 0;
	L->read_ns = pt__now_ns();
	if (static_word(j, JF_S_THREADS, &list) || !list || pt__jvm_read(j, list + j->f[JF_TL_LENGTH].v, &n, 4) ||
	    !n || n > MAX_THREADS || pt__jvm_word(j, list + j->f[JF_TL_THREADS].v, &arr) ||
	    BASE_ARRAY_RESERVE(L->v, L->cap, n) || !(jts = base_calloc(n, sizeof(*jts))) ||
	    pt__jvm_read(j, arr, jts, n * sizeof(*jts))) {
		base_free(jts);
		return;
	}
	for (uint32_t i = 0; i < n; i++) {
		struct tname *t = &L->v[L->n];
		uint64_t os;
		int32_t tid;

		if (pt__jvm_word(j, jts[i] + j->f[JF_JT_OSTHREAD].v, &os) || !os ||
		    pt__jvm_read(j, os + j->f[JF_OS_TID].v, &tid, 4) || tid <= 0 ||
		    java_name(j, L, jts[i], t->name, sizeof(t->name)))
			continue;
		t->tid = tid;
		L->n++;
	}
	base_free(jts);
}

int pt__jvm_thread_name(struct pt_jvm *j, pid_t nstid, char *buf, size_t len)
{
	struct pt__jvm_names *L = j->names;
	uint64_t now = pt__now_ns();

	if (!L && !(L = j->names = base_calloc(1, sizeof(*L))))
		return 0;
	if (L->layout < 0 && now - L->layout_ns >= LAYOUT_RETRY_NS)
		L->layout = 0;
	if (!L->layout) {
		L->layout_ns = now;
		L->layout = find_layout(j, L) ? -1 : 1;
	}
	if (L->layout < 0)
		return 0;
	if (!L->read_ns || now - L->read_ns >= RECHECK_NS)
		read_names(j, L);
	for (size_t i = 0; i < L->n; i++)
		if (L->v[i].tid == nstid) {
			snprintf(buf, len, "%s", L->v[i].name);
			return 1;
		}
	return 0;
}
