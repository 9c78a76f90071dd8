/* What the processes of one tracer read alike is kept once (mem.h's pool,
 * objects.h): this process and a forked child of it, read as two targets. */
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ptrace/space/mem.h"
#include "ptrace/space/module.h"
#include "ptrace/space/objects.h"
#include "ptrace/proc/proc.h"
#include "tests/harness.h"

struct reader {
	pid_t pid;
	struct pt_maps *maps;
	struct pt_mem *mem;
	struct pt_modules *mods;
};

static void reader_open(struct reader *r, pid_t pid, struct pt_mem_pool *pool,
			struct pt_objects *objs)
{
	r->pid = pid;
	ASSERT_OK(pt_proc_read_maps(pid, &r->maps));
	ASSERT_OK(pt_mem_new(&r->mem, pid, pool));
	pt_mem_set_maps(r->mem, r->maps);
	ASSERT_OK(pt_modules_new(&r->mods, pid, r->mem, objs));
}

static void reader_close(struct reader *r)
{
	pt_modules_free(r->mods);
	pt_mem_free(r->mem);
	pt_maps_free(r->maps);
}

static pid_t idle_child(void)
{
	int sync[2];
	pid_t child;
	char c;

	ASSERT_OK(pipe(sync));
	child = fork();
	if (child == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);   /* dies with the test, however it ends */
		close(sync[0]);
		if (write(sync[1], "x", 1) != 1)
			_exit(1);
		for (;;)
			pause();
	}
	close(sync[1]);
	ASSERT_EQ(read(sync[0], &c, 1), 1);
	close(sync[0]);
	return child;
}

/* What one more read of addr through r did to its stats. */
static struct pt_mem_stats read_once(struct reader *r, uint64_t addr)
{
	struct pt_mem_stats a, b;
	uint64_t w;

	pt_mem_stats(r->mem, &a);
	ASSERT_OK(pt_mem_read(r->mem, addr, &w, sizeof(w)));
	pt_mem_stats(r->mem, &b);
	return (struct pt_mem_stats){ .hits = b.hits - a.hits, .misses = b.misses - a.misses,
				      .uncached = b.uncached - a.uncached,
				      .shared_hits = b.shared_hits - a.shared_hits };
}

/* The first read-only mapping of libc that lies just before a writable one
 * (its RELRO), or NULL. */
static const struct pt_map *relro_of_libc(const struct pt_maps *m)
{
	for (size_t i = 0; i + 1 < m->n; i++)
		if (strstr(m->v[i].path, "libc.so") && !(m->v[i].flags & PT_MAP_W) &&
		    m->v[i + 1].start == m->v[i].end && (m->v[i + 1].flags & PT_MAP_W))
			return &m->v[i];
	return NULL;
}

TEST(forked_processes_share_symbols_and_code_pages)
{
	uint64_t fn = (uint64_t)(uintptr_t)&getpid, ns, loads;
	struct pt_mem_pool *pool;
	struct pt_objects *objs;
	struct pt_module *a, *b;
	struct pt_mem_stats st;
	struct reader ra, rb;
	const struct pt_map *relro;
	size_t n, shared;
	pid_t child;

	ASSERT_OK(pt_mem_pool_new(&pool));
	ASSERT_OK(pt_mem_pool_size(pool, 2));
	ASSERT_OK(pt_objects_new(&objs));
	child = idle_child();
	reader_open(&ra, getpid(), pool, objs);
	reader_open(&rb, child, pool, objs);

	/* libc's symbols: read for the first process, found for the second. */
	a = pt_modules_find(ra.mods, ra.maps, fn);
	b = pt_modules_find(rb.mods, rb.maps, fn);
	ASSERT(a && b && a != b);
	ASSERT(a->obj == b->obj);
	ASSERT(a->obj->refs == 2);
	ASSERT_STR_EQ(pt_module_symbol(rb.mods, b, fn), pt_module_symbol(ra.mods, a, fn));
	pt_modules_load_stats(rb.mods, &ns, &loads);
	ASSERT_EQ(loads, 0);
	pt_objects_count(objs, &n, &shared);
	ASSERT(shared >= 1);

	/* A name looked up in the file for one is known for the other. */
	{
		const char *names[2] = { "getpid", "no_such_symbol_here" };
		uint64_t aa[2], as[2], ba[2], bs[2];

		ASSERT_EQ(pt_module_lookup(ra.mods, a, names, aa, as, 2), 1);
		ASSERT_EQ(a->obj->nnames, 2);
		ASSERT_EQ(pt_module_lookup(rb.mods, b, names, ba, bs, 2), 1);
		ASSERT_EQ(a->obj->nnames, 2);
		ASSERT(aa[0] == fn && ba[0] == fn && as[0] == bs[0] && !aa[1] && !ba[1]);
	}

	/* A code page read for the first is a hit for the second. */
	read_once(&ra, fn);
	st = read_once(&rb, fn);
	ASSERT_EQ(st.misses, 0);
	ASSERT_EQ(st.shared_hits, 1);

	/* RELRO is written by each process's loader: never shared. */
	relro = relro_of_libc(ra.maps);
	if (relro) {
		st = read_once(&ra, relro->start);
		ASSERT_EQ(st.misses, 1);
		st = read_once(&rb, relro->start);
		ASSERT_EQ(st.misses, 1);
		ASSERT_EQ(st.shared_hits, 0);
		st = read_once(&rb, relro->start);
		ASSERT_EQ(st.hits, 1);
	}

	/* The last module of a file frees its object. */
	reader_close(&rb);
	ASSERT(a->obj->refs == 1);
	reader_close(&ra);
	pt_objects_count(objs, &n, &shared);
	ASSERT_EQ(n, 0);
	kill(child, SIGKILL);
	waitpid(child, NULL, 0);
	pt_objects_free(objs);
	pt_mem_pool_free(pool);
	if (!relro)
		SKIP("libc has no RELRO mapping here: that part untested");
}

TEST(a_flushed_reader_keeps_no_private_page)
{
	struct pt_mem_pool *pool;
	struct reader r;
	const struct pt_map *vdso = NULL;

	ASSERT_OK(pt_mem_pool_new(&pool));
	ASSERT_OK(pt_mem_pool_size(pool, 1));
	reader_open(&r, getpid(), pool, NULL);
	for (size_t i = 0; i < r.maps->n && !vdso; i++)
		if (!strcmp(r.maps->v[i].path, "[vdso]"))
			vdso = &r.maps->v[i];
	ASSERT(vdso != NULL);
	ASSERT_EQ(read_once(&r, vdso->start).misses, 1);
	ASSERT_EQ(read_once(&r, vdso->start).hits, 1);
	/* The vDSO's page is this process's own: after a flush (an exec) it
	 * is read again. */
	pt_mem_flush(r.mem);
	ASSERT_EQ(read_once(&r, vdso->start).misses, 1);
	/* No pool for no process: reads go uncached. */
	ASSERT_OK(pt_mem_pool_size(pool, 0));
	ASSERT_EQ(read_once(&r, vdso->start).uncached, 1);
	reader_close(&r);
	pt_mem_pool_free(pool);
}
