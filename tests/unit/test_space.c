/* The address space (ptrace/space/space.h) of the test binary itself: no
 * trace needed, so what a process's maps, memory, modules, unwinder and
 * perf map give is checked against what the test knows of itself (its own
 * functions, its own data, a JIT region it maps, a stack it copies). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <ucontext.h>
#include <unistd.h>

#include "base/mem.h"
#include "ptrace/proc/proc.h"
#include "ptrace/space/mem.h"
#include "ptrace/space/module.h"
#include "ptrace/space/space.h"
#include "ptrace/space/unwinder.h"
#include "tests/harness.h"

#define NOINLINE __attribute__((noinline, noclone))

/* Data the space reads back from this process's memory. */
static const char space_marker[] = "podprof space marker";
static volatile uint64_t space_counter = 0x5ace5ace5ace5aceull;

static struct pt_space *own_space(void)
{
	struct pt_space *s;

	ASSERT_OK(pt_space_new(&s, getpid(), NULL, NULL, NULL));
	ASSERT_OK(pt_space_refresh_maps(s));
	ASSERT(pt_space_maps(s) != NULL);
	return s;
}

static NOINLINE int space_named_function(int x)
{
	return x * 3 + 1;
}

TEST(space_names_the_processs_own_functions_and_reads_its_memory)
{
	struct pt_space *s = own_space();
	const struct pt_module *mod;
	const char *name;
	char buf[sizeof(space_marker)];
	uint64_t addrs[2], sizes[2], word;
	const char *const names[2] = { "space_named_function", "space_counter" };

	ASSERT_EQ(pt_space_pid(s), getpid());
	ASSERT_EQ(pt_space_nspid(s), getpid());   /* our namespace is its own */
	/* A function of the test binary by its .symtab, at its entry and inside. */
	pt_space_name(s, (uint64_t)(uintptr_t)space_named_function, &name, &mod);
	ASSERT_STR_EQ(name, "space_named_function");
	ASSERT(mod != NULL);
	pt_space_name(s, (uint64_t)(uintptr_t)space_named_function + 1, &name, &mod);
	ASSERT_STR_EQ(name, "space_named_function");
	ASSERT(strlen(pt_space_build_id(s, (uint64_t)(uintptr_t)space_named_function)) == 40);
	ASSERT(!pt_space_is_go(s, (uint64_t)(uintptr_t)space_named_function));
	ASSERT_EQ(pt_space_go_lines(s, (uint64_t)(uintptr_t)space_named_function, NULL, 0), 0);
	/* Its data, read from outside (process_vm_readv on ourselves). */
	ASSERT_OK(pt_space_read(s, (uint64_t)(uintptr_t)space_marker, buf, sizeof(buf)));
	ASSERT_STR_EQ(buf, space_marker);
	ASSERT_OK(pt_space_read(s, (uint64_t)(uintptr_t)&space_counter, &word, sizeof(word)));
	ASSERT_U64_EQ(word, space_counter);
	/* A function and a datum looked up by name in the module of an address. */
	ASSERT_EQ(pt_space_lookup(s, (uint64_t)(uintptr_t)space_named_function, names, addrs, sizes, 2), 2);
	ASSERT_U64_EQ(addrs[0], (uint64_t)(uintptr_t)space_named_function);
	ASSERT_U64_EQ(addrs[1], (uint64_t)(uintptr_t)&space_counter);
	ASSERT_U64_EQ(sizes[1], sizeof(space_counter));
	/* Outside every module: no name, and no lookup. */
	ASSERT_EQ(pt_space_lookup(s, 8, names, addrs, sizes, 2), -ENOENT);
	ASSERT_EQ(pt_space_read(s, 8, &word, sizeof(word)), -EFAULT);
	pt_space_free(s);
}

TEST(space_names_jit_code_from_the_processs_perf_map)
{
	char path[64], line[128];
	struct pt_space *s;
	const struct pt_module *mod;
	const char *name;
	uint8_t *code = mmap(NULL, 4096, PROT_READ | PROT_WRITE | PROT_EXEC,
			     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	FILE *f;

	ASSERT(code != MAP_FAILED);
	code[0] = 0xc3;
	snprintf(path, sizeof(path), "/tmp/perf-%d.map", (int)getpid());
	ASSERT((f = fopen(path, "w")) != NULL);
	snprintf(line, sizeof(line), "%llx 40 JS:*jitted /app/hot.js:3:1\n",
		 (unsigned long long)(uintptr_t)code);
	fputs(line, f);
	fclose(f);
	s = own_space();   /* maps read after the mapping: it is known, as anonymous */
	pt_space_name(s, (uint64_t)(uintptr_t)code + 0x10, &name, &mod);
	unlink(path);
	ASSERT(mod == NULL);
	ASSERT_STR_EQ(name, "JS:*jitted /app/hot.js:3:1");
	pt_space_name(s, (uint64_t)(uintptr_t)code + 0x40, &name, &mod);   /* past it */
	ASSERT(name == NULL);
	munmap(code, 4096);
	pt_space_free(s);
}

TEST(space_refresh_for_finds_a_mapping_made_after_the_maps_were_read)
{
	struct pt_space *s = own_space();
	void *late = mmap(NULL, 4096, PROT_READ | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	ASSERT(late != MAP_FAILED);
	ASSERT(pt_maps_find(pt_space_maps(s), (uint64_t)(uintptr_t)late) == NULL);
	/* Read too soon after the last read: the backoff holds it (10 ms). */
	ASSERT_EQ(pt_space_refresh_for(s, (uint64_t)(uintptr_t)late), 0);
	usleep(20000);
	ASSERT_EQ(pt_space_refresh_for(s, (uint64_t)(uintptr_t)late), 1);
	ASSERT(pt_maps_find(pt_space_maps(s), (uint64_t)(uintptr_t)late) != NULL);
	/* Held (an exec to be acknowledged), the maps stay as they are. */
	pt_space_hold(s, 1);
	munmap(late, 4096);
	ASSERT_OK(pt_space_refresh_maps(s));
	ASSERT(pt_maps_find(pt_space_maps(s), (uint64_t)(uintptr_t)late) != NULL);
	pt_space_reset(s);   /* lets go: read anew */
	ASSERT(pt_maps_find(pt_space_maps(s), (uint64_t)(uintptr_t)late) == NULL);
	pt_space_free(s);
}

/* Copies the running thread's registers and stack into cap, as a stop
 * would: the caller's frames lie above the copy's start. */
static NOINLINE void copy_self(struct pt_capture *cap, uint8_t *stack, size_t len)
{
	ucontext_t uc;
	greg_t *g = uc.uc_mcontext.gregs;

	ASSERT_OK(getcontext(&uc));
	memset(cap, 0, sizeof(*cap));
	cap->regs.rip = (uint64_t)g[REG_RIP];
	cap->regs.rsp = (uint64_t)g[REG_RSP];
	cap->regs.rbp = (uint64_t)g[REG_RBP];
	cap->regs.rbx = (uint64_t)g[REG_RBX];
	cap->regs.r12 = (uint64_t)g[REG_R12];
	cap->regs.r13 = (uint64_t)g[REG_R13];
	cap->regs.r14 = (uint64_t)g[REG_R14];
	cap->regs.r15 = (uint64_t)g[REG_R15];
	/* As a stop copies it: process_vm_readv (a memcpy would cross the
	 * other frames' redzones under ASan). */
	ASSERT(pt_mem_read_partial(getpid(), cap->regs.rsp, stack, len) == (ssize_t)len);
	cap->stack = stack;
	cap->stack_len = len;
	cap->stack_limit = len;
}

static NOINLINE int space_walk_level3(struct pt_capture *cap, uint8_t *stack, size_t len)
{
	copy_self(cap, stack, len);
	return (int)len;
}

static NOINLINE int space_walk_level2(struct pt_capture *cap, uint8_t *stack, size_t len)
{
	return space_walk_level3(cap, stack, len) + 1;
}

static NOINLINE int space_walk_level1(struct pt_capture *cap, uint8_t *stack, size_t len)
{
	return space_walk_level2(cap, stack, len) + 1;
}

TEST(space_unwinds_a_copy_of_its_own_stack)
{
	struct pt_space *s = own_space();
	static const char *const want[] = { "copy_self", "space_walk_level3", "space_walk_level2",
					    "space_walk_level1" };
	size_t len = 16384;
	uint8_t *stack = base_malloc(len);
	struct pt_capture cap;
	uint64_t frames[64];
	const struct pt_map *m = pt_maps_find(pt_space_maps(s), (uint64_t)(uintptr_t)&len);
	int complete, n;

	ASSERT(stack && m);
	/* As much as the stack holds above here, 16 KiB at most (less a
	 * margin for the frames below: copy_self's). */
	if (m->end - (uint64_t)(uintptr_t)&len < len)
		len = (size_t)(m->end - (uint64_t)(uintptr_t)&len);
	ASSERT(space_walk_level1(&cap, stack, len) > 0);
	n = pt_unwind(pt_space_unwinder(s), &cap, frames, 64, &complete);
	ASSERT(n >= 5);
	for (int i = 0; i < 4; i++) {
		const struct pt_module *mod;
		const char *name;

		pt_space_name(s, frames[i], &name, &mod);
		if (!name || strcmp(name, want[i]))
			FAIL_AT("frame %d is %s, want %s", i, name ? name : "(none)", want[i]);
	}
	ASSERT(cap.stack_used > 0 && cap.stack_used <= len);
	base_free(stack);
	pt_space_free(s);
}

TEST(space_of_a_gone_process_says_so)
{
	struct pt_space *s;
	pid_t pid = fork();

	ASSERT(pid >= 0);
	if (pid == 0)
		_exit(0);
	ASSERT(waitpid(pid, NULL, 0) == pid);
	ASSERT_OK(pt_space_new(&s, pid, NULL, NULL, NULL));
	ASSERT_EQ(pt_space_refresh_maps(s), -ESRCH);
	pt_space_free(s);
}

/* Many regions read in few calls (pt_space_read_regions): 600 regions of
 * a buffer of ours, one in three unreadable (an address in a page we
 * unmapped), more than one batch of the kernel's: every readable region
 * holds its bytes, every unreadable one says -EFAULT and leaves the next
 * ones unharmed; a gone process's regions all say -ESRCH. */
TEST(space_reads_many_regions_whatever_some_of_them_hold)
{
	enum { N = 600, LEN = 24 };
	struct pt_space *s = own_space();
	struct pt_mem_region *r = base_calloc(N, sizeof(*r));
	uint8_t *src, *dst = base_calloc(N, LEN), *hole;
	long page = sysconf(_SC_PAGESIZE);
	pid_t pid;

	ASSERT(r && dst);
	src = mmap(NULL, (size_t)page * 2, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	ASSERT(src != MAP_FAILED);
	hole = src + page;
	ASSERT(munmap(hole, (size_t)page) == 0);
	for (int i = 0; i < page; i++)
		src[i] = (uint8_t)(i * 7 + 3);
	for (int i = 0; i < N; i++) {
		uint64_t at = i % 3 == 1 ? (uint64_t)(uintptr_t)hole + (uint64_t)i :
			      (uint64_t)(uintptr_t)src + (uint64_t)(i % (page - LEN));

		r[i] = (struct pt_mem_region){ at, dst + (size_t)i * LEN, LEN, 12345 };
	}
	ASSERT_OK(pt_space_read_regions(s, r, N));
	for (int i = 0; i < N; i++) {
		if (i % 3 == 1) {
			ASSERT_EQ(r[i].err, -EFAULT);
			continue;
		}
		ASSERT_EQ(r[i].err, 0);
		ASSERT(!memcmp(dst + (size_t)i * LEN, src + i % (page - LEN), LEN));
	}
	/* A region that runs into the hole is not read in part. */
	r[0] = (struct pt_mem_region){ (uint64_t)(uintptr_t)hole - 8, dst, 16, 0 };
	r[1] = (struct pt_mem_region){ (uint64_t)(uintptr_t)src, dst + 16, 8, 0 };
	ASSERT_OK(pt_space_read_regions(s, r, 2));
	ASSERT_EQ(r[0].err, -EFAULT);
	ASSERT_EQ(r[1].err, 0);
	ASSERT(!memcmp(dst + 16, src, 8));
	pt_space_free(s);
	/* A gone process. */
	pid = fork();
	ASSERT(pid >= 0);
	if (pid == 0)
		_exit(0);
	ASSERT(waitpid(pid, NULL, 0) == pid);
	ASSERT_OK(pt_space_new(&s, pid, NULL, NULL, NULL));
	ASSERT_EQ(pt_space_read_regions(s, r, 2), -ESRCH);
	ASSERT_EQ(r[0].err, -ESRCH);
	ASSERT_EQ(r[1].err, -ESRCH);
	pt_space_free(s);
	munmap(src, (size_t)page);
	base_free(r);
	base_free(dst);
}
