/* /proc parsers on recorded and hostile samples. */
#include <errno.h>
#include <unistd.h>

#include "ptrace/proc/proc.h"
#include "tests/harness.h"

TEST(stat_plain)
{
	struct pt_stat st;

	ASSERT_OK(pt_proc_parse_stat("4242 (busy) R 1 4242 4242 0 -1 4194304 120 0 0 0 "
				     "314 15 0 0 20 0 3 0 987654 10000000 321 18446744073709551615 "
				     "94000000000000 94000000004000 140720000000000 0",
				     &st));
	ASSERT_EQ(st.rss_pages, 321);
	ASSERT_STR_EQ(st.comm, "busy");
	ASSERT_EQ(st.state, 'R');
	ASSERT_EQ(st.ppid, 1);
	ASSERT_EQ(st.utime, 314);
	ASSERT_EQ(st.stime, 15);
	ASSERT_EQ(st.num_threads, 3);
	ASSERT_EQ(st.starttime, 987654);
	ASSERT_EQ(st.rss_pages, 321);
	ASSERT_EQ(st.processor, -1);   /* the line ends before field 39 */
	ASSERT_OK(pt_proc_parse_stat("4242 (busy) R 1 4242 4242 0 -1 4194304 120 0 0 0 314 15 0 0 20 0 "
				     "3 0 987654 10000000 321 18446744073709551615 1 1 0 0 0 0 0 0 "
				     "0 0 0 0 17 3 0 0 0 0 0", &st));
	ASSERT_EQ(st.processor, 3);
}

TEST(stat_hostile_comm)
{
	struct pt_stat st;

	/* A comm may hold spaces and ") " that look like the end of the field. */
	ASSERT_OK(pt_proc_parse_stat("7 (a) S 9 (x) ) D 5 7 7 0 -1 64 0 0 0 0 1 2 0 0 20 0 "
				     "1 0 55 0 0 0", &st));
	ASSERT_STR_EQ(st.comm, "a) S 9 (x) ");
	ASSERT_EQ(st.state, 'D');
	ASSERT_EQ(st.ppid, 5);
	ASSERT_EQ(st.utime, 1);
}

TEST(stat_malformed)
{
	struct pt_stat st;

	ASSERT_EQ(pt_proc_parse_stat("", &st), -EBADMSG);
	ASSERT_EQ(pt_proc_parse_stat("12 busy R 1", &st), -EBADMSG);
	ASSERT_EQ(pt_proc_parse_stat("12 (busy) R 1 2", &st), -EBADMSG);
	ASSERT_EQ(pt_proc_parse_stat("12 (busy)", &st), -EBADMSG);
	ASSERT_EQ(pt_proc_parse_stat("12 )busy( R 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 1 2 3", &st),
		  -EBADMSG);
}

TEST(stat_long_comm_truncated)
{
	char text[8192], comm[4000];
	struct pt_stat st;

	memset(comm, 'x', sizeof(comm) - 1);
	comm[sizeof(comm) - 1] = '\0';
	snprintf(text, sizeof(text), "1 (%s) S 0 1 1 0 -1 0 0 0 0 0 5 6 0 0 20 0 1 0 1 0 0", comm);
	ASSERT_OK(pt_proc_parse_stat(text, &st));
	ASSERT_EQ(strlen(st.comm), sizeof(st.comm) - 1);
	ASSERT_EQ(st.stime, 6);
}

TEST(schedstat_and_status)
{
	uint64_t ns, wait, slices;
	long long v;
	pid_t p;
	const char *status = "Name:\tbusy\nPid:\t4242\nNSpid:\t4242\t17\nTracerPid:\t0\n"
			     "VmRSS:\t  1234 kB\n";

	ASSERT_OK(pt_proc_parse_schedstat("123456789 42 7\n", &ns, NULL, NULL));
	ASSERT_U64_EQ(ns, 123456789);
	ASSERT_OK(pt_proc_parse_schedstat("123456789 42 7\n", &ns, &wait, NULL));
	ASSERT_U64_EQ(ns, 123456789);
	ASSERT_U64_EQ(wait, 42);
	ASSERT_OK(pt_proc_parse_schedstat("123456789 42 7\n", &ns, NULL, &slices));
	ASSERT_U64_EQ(slices, 7);
	ASSERT_EQ(pt_proc_parse_schedstat("x", &ns, NULL, NULL), -EBADMSG);
	ASSERT_EQ(pt_proc_parse_schedstat("5", &ns, &wait, NULL), -EBADMSG);
	ASSERT_EQ(pt_proc_parse_schedstat("5 6", &ns, &wait, &slices), -EBADMSG);
	ASSERT_OK(pt_proc_parse_loadavg("3.26 2.08 1.78 12/801 10938\n", &ns));
	ASSERT_U64_EQ(ns, 12);
	ASSERT_EQ(pt_proc_parse_loadavg("3.26 2.08 12/801 10938\n", &ns), -EBADMSG);
	ASSERT_EQ(pt_proc_parse_loadavg("3.26 2.08 1.78 12\n", &ns), -EBADMSG);
	ASSERT_EQ(pt_proc_parse_loadavg("", &ns), -EBADMSG);
	ASSERT_OK(pt_proc_parse_nspid(status, &p));
	ASSERT_EQ(p, 17);
	ASSERT_OK(pt_proc_status_value(status, "VmRSS", &v));
	ASSERT_EQ(v, 1234);
	ASSERT_OK(pt_proc_status_value(status, "TracerPid", &v));
	ASSERT_EQ(v, 0);
	ASSERT_EQ(pt_proc_status_value(status, "Nope", &v), -ENOENT);
	ASSERT_OK(pt_proc_parse_nspid("Name:\tx\nPid:\t99\n", &p));
	ASSERT_EQ(p, 99);
}

TEST(maps_recorded)
{
	const char *text =
		"55d0c0a00000-55d0c0a01000 r--p 00000000 fd:01 1835 /usr/bin/my app (deleted)\n"
		"55d0c0a01000-55d0c0a02000 r-xp 00001000 fd:01 1835 /usr/bin/my app (deleted)\n"
		"7f0000000000-7f0000021000 rw-p 00000000 00:00 0 \n"
		"7f1000000000-7f1000100000 r-xp 00026000 08:02 4711   /lib/x86_64-linux-gnu/libc.so.6\n"
		"7ffd5e1f0000-7ffd5e1f2000 r-xp 00000000 00:00 0                          [vdso]\n";
	struct pt_maps *m;
	const struct pt_map *x;

	ASSERT_OK(pt_proc_parse_maps(text, strlen(text), &m));
	ASSERT_EQ(m->n, 5);
	ASSERT_STR_EQ(m->v[0].path, "/usr/bin/my app");
	ASSERT(m->v[0].flags & PT_MAP_DELETED);
	ASSERT(m->v[1].flags & PT_MAP_X);
	ASSERT_U64_EQ(m->v[1].offset, 0x1000);
	ASSERT_EQ(m->v[1].dev_major, 0xfd);
	ASSERT_EQ(m->v[1].inode, 1835);
	ASSERT_STR_EQ(m->v[2].path, "");
	ASSERT(m->v[2].flags & PT_MAP_W);
	ASSERT_STR_EQ(m->v[3].path, "/lib/x86_64-linux-gnu/libc.so.6");
	ASSERT_STR_EQ(m->v[4].path, "[vdso]");
	x = pt_maps_find(m, 0x7f1000000500);
	ASSERT(x == &m->v[3]);
	ASSERT(pt_maps_find(m, 0x7f0fffffffff) == NULL);
	ASSERT(pt_maps_find(m, 0x55d0c0a02000) == NULL);
	pt_maps_free(m);
}

TEST(maps_hostile)
{
	struct pt_maps *m;
	static const char *bad[] = {
		"zzzz-1000 r-xp 00000000 00:00 0 /x\n",
		"1000-2000 r-xp\n",
		"2000-1000 r-xp 00000000 00:00 0 /x\n",   /* end before start */
		"1000-2000 r-xp 00000000 00:00 abc /x\n",
		"1000 2000 r-xp 00000000 00:00 0 /x\n",
	};

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		ASSERT_EQ(pt_proc_parse_maps(bad[i], strlen(bad[i]), &m), -EBADMSG);
		ASSERT(m == NULL);
	}
	/* A very long path is kept whole; no line length assumption. */
	{
		size_t len = 70000;
		char *t = malloc(len + 64);

		memcpy(t, "1000-2000 r-xp 00000000 00:00 7 /", 33);
		memset(t + 33, 'p', len);
		strcpy(t + 33 + len, "\n");
		ASSERT_OK(pt_proc_parse_maps(t, strlen(t), &m));
		ASSERT_EQ(strlen(m->v[0].path), len + 1);
		pt_maps_free(m);
		free(t);
	}
	/* No trailing newline, empty input. */
	ASSERT_OK(pt_proc_parse_maps("1000-2000 r-xp 00000000 00:00 0", 31, &m));
	ASSERT_EQ(m->n, 1);
	pt_maps_free(m);
	ASSERT_OK(pt_proc_parse_maps("", 0, &m));
	ASSERT_EQ(m->n, 0);
	pt_maps_free(m);
}

TEST(maps_and_tasks_of_self)
{
	struct pt_maps *m;
	pid_t *tids;
	size_t n;
	int found = 0;

	ASSERT_OK(pt_proc_read_maps(getpid(), &m));
	ASSERT(pt_maps_find(m, (uint64_t)(uintptr_t)&pt_proc_parse_maps) != NULL);
	pt_maps_free(m);
	ASSERT_OK(pt_proc_list_tasks(getpid(), 100, &tids, &n));
	for (size_t i = 0; i < n; i++)
		found |= tids[i] == getpid();
	ASSERT(found);
	free(tids);
	ASSERT_EQ(pt_proc_read_maps(999999999, &m), -ESRCH);
}

TEST(smaps_recorded_and_hostile)
{
	static const char text[] =
		"55d0c0a00000-55d0c0a02000 r--p 00000000 fd:01 1835 /usr/bin/app (deleted)\n"
		"Size:                  8 kB\n"
		"Rss:                   8 kB\n"
		"Pss:                   4 kB\n"
		"Private_Dirty:         0 kB\n"
		"Swap:                  0 kB\n"
		"VmFlags: rd mr mw me dw sd\n"
		"7f1c2a000000-7f1c2e000000 rw-p 00000000 00:00 0 \n"
		"Rss:               65536 kB\n"
		"Pss:               65536 kB\n"
		"Private_Dirty:     65000 kB\n"
		"Swap:                 12 kB\n"
		"7f1c2e000000-7f1c2e001000 ---p 00000000 00:00 0 [anon:guard - with dash]\n"
		"Rss: 99999999999999999999999 kB\n";
	struct pt_smaps *m;

	ASSERT_OK(pt_proc_parse_smaps(text, sizeof(text) - 1, &m));
	ASSERT_EQ(m->n, 3);
	ASSERT_STR_EQ(m->v[0].map.path, "/usr/bin/app");
	ASSERT_EQ(m->v[0].rss, 8192);
	ASSERT_EQ(m->v[0].pss, 4096);
	ASSERT_EQ(m->v[1].rss, 65536ull << 10);
	ASSERT_EQ(m->v[1].private_dirty, 65000ull << 10);
	ASSERT_EQ(m->v[1].swap, 12ull << 10);
	ASSERT_STR_EQ(m->v[2].map.path, "[anon:guard - with dash]");
	ASSERT_EQ(m->v[2].rss, 0);   /* an overflowing number is not taken */
	pt_smaps_free(m);
	ASSERT_EQ(pt_proc_parse_smaps("Rss: 4 kB\nnot a mapping\n", 24, &m), -EBADMSG);
	ASSERT(m == NULL);
}

static long long rollup_rss_of_self(void)
{
	char buf[4096];
	long long rss = -1;

	if (pt_proc_slurp("/proc/self/smaps_rollup", buf, sizeof(buf)) <= 0 ||
	    pt_proc_status_value(buf, "Rss", &rss) < 0)
		return -1;
	return rss;
}

TEST(smaps_of_self_sum_to_rollup)
{
	/* This process is live: reading smaps maps and frees buffers (under
	 * ASan, its quarantine keeps what was freed resident), so the sum is
	 * held between the rollups read just before and just after it, give or
	 * take 256 kB; a few tries, as the process may move between the reads
	 * (the integration test holds a quiet target to the exact total). */
	long long lo = 0, hi = 0;
	uint64_t sum = 0;

	for (int attempt = 0; attempt < 5; attempt++) {
		struct pt_smaps *m;
		long long before = rollup_rss_of_self(), after;

		ASSERT(before > 0);
		ASSERT_OK(pt_proc_read_smaps(getpid(), &m));
		sum = 0;
		for (size_t i = 0; i < m->n; i++)
			sum += m->v[i].rss;
		pt_smaps_free(m);
		after = rollup_rss_of_self();
		ASSERT(after > 0);
		lo = (before < after ? before : after) - 256;
		hi = (before > after ? before : after) + 256;
		if ((long long)(sum / 1024) >= lo && (long long)(sum / 1024) <= hi)
			return;
	}
	FAIL_AT("smaps sum %llu kB, smaps_rollup between %lld and %lld kB",
		(unsigned long long)(sum / 1024), lo + 256, hi - 256);
}
