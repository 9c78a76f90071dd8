/* The JVM reader (ptrace/runtimes/jvm/): its decoders (UNSIGNED5, the
 * compressed line number table, class names) against bytes worked out by
 * hand from HotSpot's formats; and a JVM made up in this process's own
 * memory, its structures laid out as this file likes and described by
 * VMStructs tables of its own, so that the reader finds every field by
 * name: a stack of a compiled frame, an interpreted one and the call stub
 * walked into tokens and named, then the same JVM lying (a free segment,
 * a Method that is none, a frame size past the stack, a frame link that
 * goes down) giving fewer frames, and tables that are no VMStructs
 * refused. */
#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ptrace/core/runtime.h"
#include "ptrace/runtimes/jvm/jvm.h"
#include "ptrace/runtimes/jvm/methods.h"
#include "ptrace/runtimes/jvm/threads.h"
#include "ptrace/space/space.h"
#include "ptrace/space/stackmem.h"
#include "tests/harness.h"

/* ---- decoders ------------------------------------------------------------------ */

TEST(jvm_unsigned5)
{
	/* 17 (no excluded byte): a byte below 192 ends; each further byte
	 * counts 64 times more. 21 on: every byte one more. */
	static const uint8_t a[] = { 0x05, 0xc0 + 2, 0x03, 0xff, 0xff, 0xff, 0xff, 0x03 };
	static const uint8_t b[] = { 0x06, 0xc0 + 3, 0x04 };
	size_t i = 0;
	uint32_t v;

	ASSERT_OK(pt_jvm_u5(a, sizeof(a), &i, 0, &v));
	ASSERT_EQ(v, 5);
	ASSERT_OK(pt_jvm_u5(a, sizeof(a), &i, 0, &v));
	ASSERT_EQ(v, 194 + 3 * 64);
	ASSERT_EQ(i, 3);
	/* five bytes at most: the fifth ends it whatever it is */
	ASSERT_OK(pt_jvm_u5(a, sizeof(a), &i, 0, &v));
	ASSERT_U64_EQ(v, 255u + (255u << 6) + (255u << 12) + (255u << 18) + (3u << 24));
	ASSERT_EQ(i, 8);
	ASSERT_EQ(pt_jvm_u5(a, sizeof(a), &i, 0, &v), -EBADMSG);   /* nothing left */
	i = 0;
	ASSERT_OK(pt_jvm_u5(b, sizeof(b), &i, 1, &v));
	ASSERT_EQ(v, 5);
	ASSERT_OK(pt_jvm_u5(b, sizeof(b), &i, 1, &v));
	ASSERT_EQ(v, 194 + 3 * 64);
	i = 0;
	ASSERT_EQ(pt_jvm_u5((const uint8_t *)"\0", 1, &i, 1, &v), -EBADMSG);   /* the excluded byte */
	i = 0;
	ASSERT_EQ(pt_jvm_u5(b + 1, 1, &i, 1, &v), -EBADMSG);   /* cut short */
}

TEST(jvm_line_table)
{
	/* (bci, line): (0, 10) escaped (line delta 10 > 7: 0xff, then the
	 * zig-zag deltas 0 and 20), (4, 11) as 4 << 3 | 1, (9, 13) as
	 * 5 << 3 | 2, (2, 12) escaped (bci back by 7: zig-zag 13, line -1:
	 * 1), the end. */
	static const uint8_t t17[] = { 0xff, 0x00, 0x14, 0x21, 0x2a, 0xff, 0x0d, 0x01, 0x00 };
	static const uint8_t t21[] = { 0xff, 0x01, 0x15, 0x21, 0x2a, 0xff, 0x0e, 0x02, 0x00 };
	int start;

	for (int x = 0; x < 2; x++) {
		const uint8_t *t = x ? t21 : t17;

		ASSERT_EQ(pt_jvm_line_of(t, sizeof(t17), x, 0, &start), 10);
		ASSERT_EQ(start, 10);
		ASSERT_EQ(pt_jvm_line_of(t, sizeof(t17), x, 3, &start), 12);   /* (2, 12): greatest below 3 */
		ASSERT_EQ(pt_jvm_line_of(t, sizeof(t17), x, 4, &start), 11);   /* exact */
		ASSERT_EQ(pt_jvm_line_of(t, sizeof(t17), x, 8, &start), 11);
		ASSERT_EQ(pt_jvm_line_of(t, sizeof(t17), x, 9, &start), 13);
		ASSERT_EQ(pt_jvm_line_of(t, sizeof(t17), x, 500, &start), 13);
		ASSERT_EQ(pt_jvm_line_of(t, sizeof(t17), x, -1, &start), 0);   /* unknown bci */
		ASSERT_EQ(start, 10);
		/* no end within the bytes given */
		ASSERT_EQ(pt_jvm_line_of(t, sizeof(t17) - 1, x, 4, &start), -1);
		ASSERT_EQ(pt_jvm_line_of(t, 2, x, 4, &start), -1);
	}
	/* the other release's bytes: 0x00 is no byte of 21's numbers */
	ASSERT_EQ(pt_jvm_line_of(t17, sizeof(t17), 1, 4, &start), -1);
	/* lines below 0 or bcis past a method's largest: no table */
	ASSERT_EQ(pt_jvm_line_of((const uint8_t[]){ 0xff, 0x00, 0x03, 0x00 }, 4, 0, 0, &start), -1);
	ASSERT_EQ(pt_jvm_line_of((const uint8_t[]){ 0xff, 0xc0 + 62, 0xc0 + 63, 0xc0 + 63, 0x3f, 0x00, 0x00 },
				 7, 0, 0, &start), -1);
}

TEST(jvm_class_names)
{
	char out[64];

	ASSERT_EQ(pt_jvm_class_name("java/lang/Thread", 16, out, sizeof(out)), 16);
	ASSERT_STR_EQ(out, "java.lang.Thread");
	/* hidden classes: 21 on ("+0x"), and as Class.getName spells 17's */
	pt_jvm_class_name("Hot$$Lambda+0x0000000801001000", 30, out, sizeof(out));
	ASSERT_STR_EQ(out, "Hot$$Lambda");
	pt_jvm_class_name("a/Hot$$Lambda$14/0x0000000800c03000", 35, out, sizeof(out));
	ASSERT_STR_EQ(out, "a.Hot$$Lambda$14");
	/* only a suffix of hex digits to the end */
	pt_jvm_class_name("Odd+0xzz", 8, out, sizeof(out));
	ASSERT_STR_EQ(out, "Odd+0xzz");
	pt_jvm_class_name("Odd+0x", 6, out, sizeof(out));
	ASSERT_STR_EQ(out, "Odd+0x");
	ASSERT_EQ(pt_jvm_class_name("java/lang/Thread", 16, out, 5), 4);   /* cut to fit */
	ASSERT_STR_EQ(out, "java");
}

TEST(jvm_string_as_utf8)
{
	/* "worker-\xe9\xdf-1" in Latin-1, and with a G clef (a surrogate pair)
	 * and a lone surrogate in UTF-16LE */
	static const uint8_t latin1[] = { 'w', 0xe9, 0xdf, '-', '1' };
	static const uint8_t utf16[] = { 'a', 0, 0x34, 0xd8, 0x1e, 0xdd, 0x00, 0xdc, '\n', 0 };
	char out[32];

	ASSERT_EQ(pt_jvm_string_utf8(latin1, sizeof(latin1), 0, out, sizeof(out)), 7);
	ASSERT_STR_EQ(out, "w\xc3\xa9\xc3\x9f-1");
	ASSERT_EQ(pt_jvm_string_utf8(utf16, sizeof(utf16), 1, out, sizeof(out)), 9);
	ASSERT_STR_EQ(out, "a\xf0\x9d\x84\x9e\xef\xbf\xbd?");   /* U+1D11E, U+FFFD, '?' */
	/* cut at a character's end */
	ASSERT_EQ(pt_jvm_string_utf8(latin1, sizeof(latin1), 0, out, 3), 1);
	ASSERT_STR_EQ(out, "w");
	ASSERT_EQ(pt_jvm_string_utf8(utf16, 3, 1, out, sizeof(out)), -1);   /* odd UTF-16 */
	ASSERT_EQ(pt_jvm_string_utf8(latin1, sizeof(latin1), 2, out, sizeof(out)), -1);   /* no such coder */
}

/* ---- a JVM of our own ---------------------------------------------------------- */

/* Its structures, laid out unlike HotSpot's: the tables say where. */
struct f_vs { char *lo_b, *hi_b, *low, *high; };
struct f_heap { uint64_t pad; struct f_vs segmap; int log2; struct f_vs memory; };
struct f_ga { int len, cap; struct f_heap **data; };
struct f_hb { size_t length; bool used; };
struct f_blob {
	uint64_t pad;
	int frame_size;
	const char *name;
	int fco, size;
	uint64_t code_end, code_begin;
	int compile_id;
	uint64_t method;
};
struct f_sq { uint64_t pad; int limit; char *buffer; };
struct f_sym { uint32_t hash; uint16_t len; char body[42]; };
struct f_klass { uint64_t pad; struct f_sym *name; uint64_t pad2; struct f_cp *constants; };
struct f_cp { uint64_t pad; int length; uint16_t source; struct f_klass *holder; struct f_sym *e[8]; };
struct f_cm { struct f_cp *constants; uint16_t code_size, name, sig, flags; uint8_t code[24]; };
struct f_method { uint64_t pad[3]; struct f_cm *cm; };

/* The VMStructs entries, as libjvm lays them out (48, 40 and 16 bytes). */
struct vs_entry {
	const char *type, *field, *tstring;
	int32_t is_static;
	uint64_t offset;
	void *address;
};
struct vt_entry {
	const char *type, *super;
	int32_t oop, integer, is_unsigned;
	uint64_t size;
};
struct vc_entry {
	const char *name;
	int32_t value;
};

#define HEAP (64u << 10)
#define SEG 128u

/* Everything of one made-up JVM. */
struct fake {
	struct vs_entry s[48];
	struct vt_entry t[12];
	struct vc_entry c[4];
	uint64_t desc[16];       /* the values of the 16 symbols */
	uint64_t sym[16];        /* their addresses */
	/* its statics */
	struct f_ga *heaps;
	char *low, *high;
	struct f_sq *interp;
	uint64_t call_stub_ret;
	int major;
	/* its data */
	struct f_ga ga;
	struct f_heap heap, *heap_list[1];
	uint8_t segmap[HEAP / SEG];
	uint8_t *code;           /* HEAP bytes */
	struct f_sq sq;
	struct f_sym s_class, s_leaf, s_caller, s_sig, s_file;
	struct f_klass klass;
	struct f_cp cp;
	struct f_cm cm_leaf, cm_caller;
	struct f_method m_leaf, m_caller;
	struct f_blob *interp_blob, *stub_blob, *nm_blob;
	uint64_t stk[64];
};

static void sym(struct f_sym *s, const char *text)
{
	s->len = (uint16_t)strlen(text);
	memcpy(s->body, text, s->len);
}

/* A block of n segments at segment at of the heap: its header, its blob
 * (returned), the segment map. */
static struct f_blob *block(struct fake *k, unsigned int at, unsigned int n, const char *name, int fs)
{
	struct f_hb *h = (struct f_hb *)(k->code + at * SEG);
	struct f_blob *b = (struct f_blob *)(k->code + at * SEG + 16);

	h->length = n;
	h->used = true;
	for (unsigned int i = 0; i < n; i++)
		k->segmap[at + i] = (uint8_t)i;
	b->name = name;
	b->frame_size = fs;
	b->size = (int)(n * SEG - 16);
	b->code_begin = (uint64_t)(b + 1);
	b->code_end = (uint64_t)b + (uint64_t)b->size;
	b->fco = 16;
	return b;
}

static void fake_make(struct fake *k)
{
	int i = 0;

	memset(k, 0, sizeof(*k));
	ASSERT(posix_memalign((void **)&k->code, 4096, HEAP) == 0);
	memset(k->code, 0, HEAP);
	memset(k->segmap, 0xff, sizeof(k->segmap));
	/* statics */
	k->s[i++] = (struct vs_entry){ "CodeCache", "_heaps", "GrowableArray<CodeHeap*>*", 1, 0, &k->heaps };
	k->s[i++] = (struct vs_entry){ "CodeCache", "_low_bound", "address", 1, 0, &k->low };
	k->s[i++] = (struct vs_entry){ "CodeCache", "_high_bound", "address", 1, 0, &k->high };
	k->s[i++] = (struct vs_entry){ "AbstractInterpreter", "_code", "StubQueue*", 1, 0, &k->interp };
	k->s[i++] = (struct vs_entry){ "StubRoutines", "_call_stub_return_address", "address", 1, 0,
				       &k->call_stub_ret };
	k->s[i++] = (struct vs_entry){ "Abstract_VM_Version", "_vm_major_version", "int", 1, 0, &k->major };
	/* fields */
	k->s[i++] = (struct vs_entry){ "GrowableArrayBase", "_len", "int", 0, offsetof(struct f_ga, len), 0 };
	k->s[i++] = (struct vs_entry){ "GrowableArray<int>", "_data", "int*", 0, offsetof(struct f_ga, data), 0 };
	k->s[i++] = (struct vs_entry){ "CodeHeap", "_memory", "VirtualSpace", 0, offsetof(struct f_heap, memory), 0 };
	k->s[i++] = (struct vs_entry){ "CodeHeap", "_segmap", "VirtualSpace", 0, offsetof(struct f_heap, segmap), 0 };
	k->s[i++] = (struct vs_entry){ "CodeHeap", "_log2_segment_size", "int", 0, offsetof(struct f_heap, log2), 0 };
	k->s[i++] = (struct vs_entry){ "VirtualSpace", "_low", "char*", 0, offsetof(struct f_vs, low), 0 };
	k->s[i++] = (struct vs_entry){ "VirtualSpace", "_high", "char*", 0, offsetof(struct f_vs, high), 0 };
	k->s[i++] = (struct vs_entry){ "HeapBlock::Header", "_used", "bool", 0, offsetof(struct f_hb, used), 0 };
	k->s[i++] = (struct vs_entry){ "StubQueue", "_stub_buffer", "address", 0, offsetof(struct f_sq, buffer), 0 };
	k->s[i++] = (struct vs_entry){ "StubQueue", "_buffer_limit", "int", 0, offsetof(struct f_sq, limit), 0 };
	k->s[i++] = (struct vs_entry){ "CodeBlob", "_name", "const char*", 0, offsetof(struct f_blob, name), 0 };
	k->s[i++] = (struct vs_entry){ "CodeBlob", "_size", "int", 0, offsetof(struct f_blob, size), 0 };
	k->s[i++] = (struct vs_entry){ "CodeBlob", "_frame_size", "int", 0, offsetof(struct f_blob, frame_size), 0 };
	k->s[i++] = (struct vs_entry){ "CodeBlob", "_frame_complete_offset", "int", 0, offsetof(struct f_blob, fco), 0 };
	k->s[i++] = (struct vs_entry){ "CodeBlob", "_code_begin", "address", 0, offsetof(struct f_blob, code_begin), 0 };
	k->s[i++] = (struct vs_entry){ "CodeBlob", "_code_end", "address", 0, offsetof(struct f_blob, code_end), 0 };
	k->s[i++] = (struct vs_entry){ "CompiledMethod", "_method", "Method*", 0, offsetof(struct f_blob, method), 0 };
	k->s[i++] = (struct vs_entry){ "nmethod", "_compile_id", "int", 0, offsetof(struct f_blob, compile_id), 0 };
	k->s[i++] = (struct vs_entry){ "Method", "_constMethod", "ConstMethod*", 0, offsetof(struct f_method, cm), 0 };
	k->s[i++] = (struct vs_entry){ "ConstMethod", "_constants", "ConstantPool*", 0,
				       offsetof(struct f_cm, constants), 0 };
	k->s[i++] = (struct vs_entry){ "ConstMethod", "_flags", "u2", 0, offsetof(struct f_cm, flags), 0 };
	k->s[i++] = (struct vs_entry){ "ConstMethod", "_code_size", "u2", 0, offsetof(struct f_cm, code_size), 0 };
	k->s[i++] = (struct vs_entry){ "ConstMethod", "_name_index", "u2", 0, offsetof(struct f_cm, name), 0 };
	k->s[i++] = (struct vs_entry){ "ConstMethod", "_signature_index", "u2", 0, offsetof(struct f_cm, sig), 0 };
	k->s[i++] = (struct vs_entry){ "ConstantPool", "_pool_holder", "InstanceKlass*", 0,
				       offsetof(struct f_cp, holder), 0 };
	k->s[i++] = (struct vs_entry){ "ConstantPool", "_source_file_name_index", "u2", 0,
				       offsetof(struct f_cp, source), 0 };
	k->s[i++] = (struct vs_entry){ "ConstantPool", "_length", "int", 0, offsetof(struct f_cp, length), 0 };
	k->s[i++] = (struct vs_entry){ "InstanceKlass", "_constants", "ConstantPool*", 0,
				       offsetof(struct f_klass, constants), 0 };
	k->s[i++] = (struct vs_entry){ "Klass", "_name", "Symbol*", 0, offsetof(struct f_klass, name), 0 };
	k->s[i++] = (struct vs_entry){ "Symbol", "_length", "u2", 0, offsetof(struct f_sym, len), 0 };
	k->s[i++] = (struct vs_entry){ "Symbol", "_body", NULL, 0, offsetof(struct f_sym, body), 0 };
	k->s[i++] = (struct vs_entry){ "Symbol", "_unused", "int", 0, 0, 0 };   /* none of ours */
	/* types (the pool's Symbols begin after its ConstantPool: its size
	 * says where; the bytecodes after the ConstMethod likewise) */
	i = 0;
	k->t[i++] = (struct vt_entry){ "int", NULL, 0, 1, 0, 4 };
	k->t[i++] = (struct vt_entry){ "u2", NULL, 0, 1, 1, 2 };
	k->t[i++] = (struct vt_entry){ "bool", NULL, 0, 1, 1, 1 };
	k->t[i++] = (struct vt_entry){ "address", NULL, 0, 0, 0, 8 };
	k->t[i++] = (struct vt_entry){ "HeapBlock", NULL, 0, 0, 0, 16 };
	k->t[i++] = (struct vt_entry){ "ConstMethod", NULL, 0, 0, 0, offsetof(struct f_cm, code) };
	k->t[i++] = (struct vt_entry){ "ConstantPool", NULL, 0, 0, 0, offsetof(struct f_cp, e) };
	k->c[0] = (struct vc_entry){ "ConstMethod::_has_linenumber_table", 0x4 };
	k->c[1] = (struct vc_entry){ "frame::interpreter_frame_sender_sp_offset", -1 };
	/* the 16 symbols' values and addresses */
	k->desc[0] = (uint64_t)k->s;
	k->desc[1] = sizeof(struct vs_entry);
	k->desc[2] = offsetof(struct vs_entry, type);
	k->desc[3] = offsetof(struct vs_entry, field);
	k->desc[4] = offsetof(struct vs_entry, tstring);
	k->desc[5] = offsetof(struct vs_entry, is_static);
	k->desc[6] = offsetof(struct vs_entry, offset);
	k->desc[7] = offsetof(struct vs_entry, address);
	k->desc[8] = (uint64_t)k->t;
	k->desc[9] = sizeof(struct vt_entry);
	k->desc[10] = offsetof(struct vt_entry, type);
	k->desc[11] = offsetof(struct vt_entry, size);
	k->desc[12] = (uint64_t)k->c;
	k->desc[13] = sizeof(struct vc_entry);
	k->desc[14] = offsetof(struct vc_entry, name);
	k->desc[15] = offsetof(struct vc_entry, value);
	for (int j = 0; j < 16; j++)
		k->sym[j] = (uint64_t)&k->desc[j];
	/* the code cache: one heap, the interpreter, a stub blob, an nmethod */
	k->major = 17;
	k->heap_list[0] = &k->heap;
	k->ga = (struct f_ga){ 1, 1, k->heap_list };
	k->heaps = &k->ga;
	k->low = (char *)k->code;
	k->high = (char *)k->code + HEAP;
	k->heap.memory.low = k->low;
	k->heap.memory.high = k->high;
	k->heap.segmap.low = (char *)k->segmap;
	k->heap.log2 = 7;
	k->interp_blob = block(k, 0, 4, "Interpreter", 0);
	k->stub_blob = block(k, 4, 4, "StubRoutines (1)", 0);
	k->nm_blob = block(k, 8, 30, "nmethod", 4);
	k->sq.buffer = (char *)k->interp_blob->code_begin;
	k->sq.limit = (int)(k->interp_blob->code_end - k->interp_blob->code_begin);
	k->interp = &k->sq;
	k->call_stub_ret = k->stub_blob->code_begin + 24;
	/* methods: pkg.Demo.leaf()V, compiled; pkg.Demo.caller()V, interpreted,
	 * with a line table (bci 0: line 10, bci 4: 11, bci 9: 13) */
	sym(&k->s_class, "pkg/Demo");
	sym(&k->s_leaf, "leaf");
	sym(&k->s_caller, "caller");
	sym(&k->s_sig, "()V");
	sym(&k->s_file, "Demo.java");
	k->klass = (struct f_klass){ .name = &k->s_class, .constants = &k->cp };
	k->cp = (struct f_cp){ .length = 8, .source = 5, .holder = &k->klass,
			       .e = { NULL, &k->s_leaf, &k->s_caller, &k->s_sig, NULL, &k->s_file } };
	k->cm_leaf = (struct f_cm){ .constants = &k->cp, .code_size = 4, .name = 1, .sig = 3 };
	k->cm_caller = (struct f_cm){ .constants = &k->cp, .code_size = 12, .name = 2, .sig = 3, .flags = 0x4 };
	memcpy(k->cm_caller.code + 12, (const uint8_t[]){ 0xff, 0x00, 0x14, 0x21, 0x2a, 0x00 }, 6);
	k->m_leaf.cm = &k->cm_leaf;
	k->m_caller.cm = &k->cm_caller;
	k->nm_blob->method = (uint64_t)&k->m_leaf;
	k->nm_blob->compile_id = 7;
	/* the stack, leaf first: the nmethod's frame (4 words), the
	 * interpreted frame (BP at word 20: its Method* at -3, bcp at -8,
	 * caller's SP at -1), the call stub's BP frame (at word 30), whose
	 * caller is C (this function) */
	k->stk[3] = k->interp_blob->code_begin + 100;
	k->stk[2] = (uint64_t)&k->stk[20];
	k->stk[12] = (uint64_t)k->cm_caller.code + 6;
	k->stk[17] = (uint64_t)&k->m_caller;
	k->stk[19] = (uint64_t)&k->stk[24];
	k->stk[20] = (uint64_t)&k->stk[30];
	k->stk[21] = k->call_stub_ret;
	k->stk[30] = 0;
	k->stk[31] = (uint64_t)(uintptr_t)fake_make + 8;
}

/* A capture of k's stack whose unwind stopped at its leaf, in the nmethod. */
static void capture(struct fake *k, struct pt_capture *cap)
{
	memset(cap, 0, sizeof(*cap));
	cap->regs.rsp = (uint64_t)k->stk;
	cap->regs.rip = k->nm_blob->code_begin + 40;
	cap->regs.rbp = 0x3;   /* C2's: any value */
	cap->stack = (uint8_t *)k->stk;
	cap->stack_len = cap->stack_limit = sizeof(k->stk);
	cap->jit_at = 0;
	cap->jit_exact = 1;
	cap->jit_pc = cap->regs.rip;
	cap->jit_sp = cap->regs.rsp;
	cap->jit_bp = cap->regs.rbp;
}

static int merge(struct pt_rt *rt, struct fake *k, uint64_t *frames, int max)
{
	struct pt_capture cap;

	capture(k, &cap);
	frames[0] = cap.regs.rip;
	return pt_runtime_jvm.merge(rt, NULL, &cap, frames, 1, max);
}

struct jvm_env {
	struct pt_space *as;
	struct pt_rt *rt;
};

static void env_open(struct jvm_env *e, struct fake *k)
{
	char why[256];

	ASSERT_OK(pt_space_new(&e->as, getpid(), NULL, NULL, NULL));
	ASSERT_OK(pt_space_refresh_maps(e->as));
	ASSERT_OK(pt_runtime_jvm.new(&e->rt, e->as, 2));
	if (pt_jvm_load(e->rt, k->sym, why, sizeof(why)))
		FAIL_AT("pt_jvm_load: %s", why);
}

static void env_close(struct jvm_env *e)
{
	pt_runtime_jvm.free(e->rt);
	pt_space_free(e->as);
}

TEST(jvm_walk_of_a_made_up_jvm)
{
	struct fake *k = calloc(1, sizeof(*k));
	struct jvm_env e;
	struct pt_rt_line ln;
	struct pt_jvm_stats st;
	uint64_t frames[16], again[16];
	int n;

	ASSERT(k);
	fake_make(k);
	env_open(&e, k);
	n = merge(e.rt, k, frames, 16);
	/* leaf (compiled, no PcDescs: the method, no line), caller at bci 6
	 * (line 11), then the call stub's caller, a return address less one */
	ASSERT(n >= 3);
	ASSERT(pt_rt_is_token(frames[0]) && pt_rt_token_row(frames[0]) == 2);
	ASSERT(pt_rt_is_token(frames[1]) && frames[1] != frames[0]);
	ASSERT_U64_EQ(frames[2], (uint64_t)(uintptr_t)fake_make + 7);
	ASSERT_EQ(pt_runtime_jvm.lines(e.rt, frames[0], &ln, 1), 1);
	ASSERT_STR_EQ(ln.func, "pkg.Demo.leaf");
	ASSERT_STR_EQ(ln.system, "pkg.Demo.leaf()V");
	ASSERT_STR_EQ(ln.file, "pkg/Demo.java");
	ASSERT_EQ(ln.line, 0);
	ASSERT_EQ(pt_runtime_jvm.lines(e.rt, frames[1], &ln, 1), 1);
	ASSERT_STR_EQ(ln.func, "pkg.Demo.caller");
	ASSERT_EQ(ln.line, 11);
	ASSERT_EQ(ln.start_line, 10);
	ASSERT_EQ(pt_runtime_jvm.lines(e.rt, pt_rt_token(2, 999), &ln, 1), 0);
	/* the same stack again: the same tokens */
	ASSERT_EQ(merge(e.rt, k, again, 16), n);
	ASSERT_U64_EQ(again[0], frames[0]);
	ASSERT_U64_EQ(again[1], frames[1]);
	pt_jvm_stats(e.rt, &st);
	ASSERT_EQ(st.walks, 2);
	ASSERT_EQ(st.java_frames, 4);
	ASSERT_EQ(st.lost, 0);
	/* a stub leaf whose return address is at its SP: named by its blob */
	{
		struct pt_capture cap;

		capture(k, &cap);
		cap.regs.rip = cap.jit_pc = k->stub_blob->code_begin + 4;
		cap.regs.rsp = cap.jit_sp = (uint64_t)&k->stk[3];   /* the interpreter's pc */
		cap.regs.rbp = cap.jit_bp = (uint64_t)&k->stk[20];  /* its frame, as it left it */
		cap.stack = (uint8_t *)&k->stk[3];
		cap.stack_len = cap.stack_limit = sizeof(k->stk) - 24;
		again[0] = cap.regs.rip;
		n = pt_runtime_jvm.merge(e.rt, NULL, &cap, again, 1, 16);
		ASSERT(n >= 3);
		ASSERT_EQ(pt_runtime_jvm.lines(e.rt, again[0], &ln, 1), 1);
		ASSERT_STR_EQ(ln.func, "StubRoutines (1)");
		ASSERT(ln.file == NULL && ln.system == NULL);
		ASSERT_U64_EQ(again[1], frames[1]);
	}
	/* room for one frame: one */
	ASSERT_EQ(merge(e.rt, k, again, 1), 1);
	ASSERT_U64_EQ(again[0], frames[0]);
	env_close(&e);
	free(k->code);
	free(k);
}

TEST(jvm_lying_gives_fewer_frames)
{
	struct fake *k = calloc(1, sizeof(*k));
	struct jvm_env e;
	uint64_t frames[16];
	struct pt_jvm_stats st;

	ASSERT(k);
	fake_make(k);
	env_open(&e, k);
	/* an interpreted frame whose Method* is none (a pool): the walk ends
	 * after the leaf */
	k->stk[17] = (uint64_t)&k->cp;
	ASSERT_EQ(merge(e.rt, k, frames, 16), 1);
	ASSERT(pt_rt_is_token(frames[0]));
	k->stk[17] = (uint64_t)&k->m_caller;
	/* a frame link that goes down the stack */
	k->stk[2] = (uint64_t)&k->stk[1];
	ASSERT_EQ(merge(e.rt, k, frames, 16), 1);
	k->stk[2] = (uint64_t)&k->stk[20];
	/* a caller's SP below its frame */
	k->stk[19] = (uint64_t)&k->stk[5];
	ASSERT_EQ(merge(e.rt, k, frames, 16), 2);
	k->stk[19] = (uint64_t)&k->stk[24];
	/* a frame size past the stack copy: no return address there */
	k->nm_blob->frame_size = 100;
	ASSERT_EQ(merge(e.rt, k, frames, 16), 1);
	ASSERT(pt_rt_is_token(frames[0]));
	/* no blob has such a frame size: the JIT frame stays as it was */
	k->nm_blob->frame_size = -5;
	ASSERT_EQ(merge(e.rt, k, frames, 16), 1);
	ASSERT(!pt_rt_is_token(frames[0]));
	k->nm_blob->frame_size = 4;
	/* a pc whose segment is free, or whose map steps past the heap's
	 * start: no blob, and the JIT frame stays as it was */
	k->segmap[8] = 0xff;
	ASSERT_EQ(merge(e.rt, k, frames, 16), 1);
	ASSERT_U64_EQ(frames[0], k->nm_blob->code_begin + 40);
	k->segmap[8] = 200;
	ASSERT_EQ(merge(e.rt, k, frames, 16), 1);
	ASSERT(!pt_rt_is_token(frames[0]));
	k->segmap[8] = 0;
	/* a blob whose code does not hold the pc */
	k->nm_blob->code_end = k->nm_blob->code_begin + 8;
	ASSERT_EQ(merge(e.rt, k, frames, 16), 1);
	ASSERT(!pt_rt_is_token(frames[0]));
	pt_jvm_stats(e.rt, &st);
	ASSERT(st.lost >= 6);
	env_close(&e);
	free(k->code);
	free(k);
}

TEST(jvm_tables_that_are_none)
{
	struct fake *k = calloc(1, sizeof(*k));
	struct pt_space *as;
	struct pt_rt *rt;
	char why[256];

	ASSERT(k);
	fake_make(k);
	ASSERT_OK(pt_space_new(&as, getpid(), NULL, NULL, NULL));
	ASSERT_OK(pt_space_refresh_maps(as));
	ASSERT_OK(pt_runtime_jvm.new(&rt, as, 2));
	/* not set up yet: a JVM starting */
	k->desc[0] = 0;
	ASSERT_EQ(pt_jvm_load(rt, k->sym, why, sizeof(why)), -EAGAIN);
	k->desc[0] = (uint64_t)k->s;
	/* an entry size no table has, an offset past it */
	k->desc[1] = 4096;
	ASSERT_EQ(pt_jvm_load(rt, k->sym, why, sizeof(why)), -EBADMSG);
	k->desc[1] = sizeof(struct vs_entry);
	k->desc[15] = 14;
	ASSERT_EQ(pt_jvm_load(rt, k->sym, why, sizeof(why)), -EBADMSG);
	k->desc[15] = offsetof(struct vc_entry, value);
	/* a field podprof needs, missing: named */
	k->s[9].field = "_elsewhere";
	ASSERT_EQ(pt_jvm_load(rt, k->sym, why, sizeof(why)), -ENOENT);
	ASSERT_STR_EQ(why, "its VMStructs lack CodeHeap::_segmap, which podprof needs");
	k->s[9].field = "_segmap";
	/* a release out of bounds */
	k->major = 1000;
	ASSERT_EQ(pt_jvm_load(rt, k->sym, why, sizeof(why)), -EBADMSG);
	k->major = 17;
	/* a symbol that cannot be read */
	k->sym[3] = 8;
	ASSERT_EQ(pt_jvm_load(rt, k->sym, why, sizeof(why)), -EFAULT);
	k->sym[3] = (uint64_t)&k->desc[3];
	ASSERT_OK(pt_jvm_load(rt, k->sym, why, sizeof(why)));
	pt_runtime_jvm.free(rt);
	pt_space_free(as);
	free(k->code);
	free(k);
}
