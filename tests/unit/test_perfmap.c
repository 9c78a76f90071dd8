/* The perf-map parser and lookup on recorded and hostile text, and the
 * opener's refusal to leave the target's root or block on a FIFO. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ptrace/space/perfmap.h"
#include "tests/harness.h"

/* Lines as node --perf-basic-prof and python -X perf write them. */
static const char node_map[] =
	"18c4000 300 Builtin:DeoptimizationEntry_Eager\n"
	"29b6f494b1de 30 JS:~podprofOuter /tmp/js/hot.js:2:22\n"
	"7fd90efc6180 298 JS:*podprofInner /tmp/js/hot.js:1:22\n"
	"0x7f0000001000 0x40 py::main:/app/x.py\r\n"
	"7fd90efc6640 1b0 JS:*podprofOuter /tmp/js/hot.js:2:22\n";

TEST(perfmap_parses_node_and_python_lines)
{
	struct pt_perfmap *pm;
	size_t bad;

	ASSERT_OK(pt_perfmap_parse(node_map, sizeof(node_map) - 1, &pm, &bad));
	ASSERT_EQ(pt_perfmap_count(pm), 5);
	ASSERT_EQ(bad, 0);
	ASSERT_STR_EQ(pt_perfmap_lookup(pm, 0x7fd90efc6180), "JS:*podprofInner /tmp/js/hot.js:1:22");
	ASSERT_STR_EQ(pt_perfmap_lookup(pm, 0x7fd90efc6417), "JS:*podprofInner /tmp/js/hot.js:1:22");
	ASSERT(pt_perfmap_lookup(pm, 0x7fd90efc6418) == NULL);   /* one past the end */
	ASSERT(pt_perfmap_lookup(pm, 0x7fd90efc617f) == NULL);
	ASSERT_STR_EQ(pt_perfmap_lookup(pm, 0x7fd90efc67ef), "JS:*podprofOuter /tmp/js/hot.js:2:22");
	ASSERT_STR_EQ(pt_perfmap_lookup(pm, 0x7f0000001010), "py::main:/app/x.py");   /* CR gone */
	ASSERT_STR_EQ(pt_perfmap_lookup(pm, 0x18c4000), "Builtin:DeoptimizationEntry_Eager");
	ASSERT(pt_perfmap_lookup(pm, 0) == NULL);
	ASSERT(pt_perfmap_lookup(pm, UINT64_MAX) == NULL);
	pt_perfmap_free(pm);
}

TEST(perfmap_later_lines_win_where_code_was_reused)
{
	static const char text[] =
		"1000 100 old_big\n"
		"1040 10 old_small\n"
		"1000 80 newer\n"
		"1040 8 newest\n";
	struct pt_perfmap *pm;

	ASSERT_OK(pt_perfmap_parse(text, sizeof(text) - 1, &pm, NULL));
	ASSERT_STR_EQ(pt_perfmap_lookup(pm, 0x1044), "newest");
	ASSERT_STR_EQ(pt_perfmap_lookup(pm, 0x1048), "newer");     /* past newest, in newer */
	ASSERT_STR_EQ(pt_perfmap_lookup(pm, 0x1000), "newer");
	ASSERT_STR_EQ(pt_perfmap_lookup(pm, 0x1090), "old_big");   /* only old_big reaches */
	pt_perfmap_free(pm);
}

TEST(perfmap_hostile_lines_are_skipped)
{
	static const char text[] =
		"\n"
		"zzzz 10 not_hex\n"
		"1000 10\n"                               /* no name */
		"1000 0 empty_range\n"                    /* size 0 */
		"ffffffffffffffff 2 wraps\n"              /* start + size overflows */
		"12345678901234567 10 too_many_digits\n"  /* > 64 bits */
		"1000\t10\tgood_tabs\n"
		"2000 10 has\0nul\n"
		"3000 10    spaced name   \n"
		"0x 10 bare_prefix\n"
		"4000 10 last_without_newline";
	struct pt_perfmap *pm;
	size_t bad;

	ASSERT_OK(pt_perfmap_parse(text, sizeof(text) - 1, &pm, &bad));
	ASSERT_EQ(pt_perfmap_count(pm), 3);
	ASSERT_EQ(bad, 7);
	ASSERT_STR_EQ(pt_perfmap_lookup(pm, 0x1008), "good_tabs");
	ASSERT(pt_perfmap_lookup(pm, 0x2008) == NULL);
	ASSERT_STR_EQ(pt_perfmap_lookup(pm, 0x3000), "spaced name");
	ASSERT_STR_EQ(pt_perfmap_lookup(pm, 0x400f), "last_without_newline");
	pt_perfmap_free(pm);
}

TEST(perfmap_names_are_cut_and_empty_text_is_empty)
{
	size_t len = 32 + PT_PERFMAP_MAX_NAME * 3;
	char *text = malloc(len + 1);
	struct pt_perfmap *pm;
	const char *name;

	ASSERT(text);
	int k = snprintf(text, len, "5000 10 ");
	memset(text + k, 'n', len - (size_t)k - 1);
	text[len - 1] = '\n';
	ASSERT_OK(pt_perfmap_parse(text, len, &pm, NULL));
	name = pt_perfmap_lookup(pm, 0x5000);
	ASSERT(name);
	ASSERT_EQ(strlen(name), PT_PERFMAP_MAX_NAME);
	pt_perfmap_free(pm);
	free(text);
	ASSERT_OK(pt_perfmap_parse("", 0, &pm, NULL));
	ASSERT_EQ(pt_perfmap_count(pm), 0);
	ASSERT(pt_perfmap_lookup(pm, 0x5000) == NULL);
	pt_perfmap_free(pm);
}

static int write_file(const char *path, const char *text)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	ssize_t n;

	if (fd < 0)
		return -1;
	n = write(fd, text, strlen(text));
	close(fd);
	return n == (ssize_t)strlen(text) ? 0 : -1;
}

static char *read_fd(int fd)
{
	static char buf[256];
	ssize_t n = read(fd, buf, sizeof(buf) - 1);

	buf[n > 0 ? n : 0] = '\0';
	return buf;
}

TEST(perfmap_open_refuses_fifo_without_blocking)
{
	/* A pid number no process has: the name is ours to make. */
	const pid_t fake = 2000000000;
	char path[64];

	snprintf(path, sizeof(path), "/tmp/perf-%d.map", (int)fake);
	unlink(path);
	ASSERT_EQ(pt_perfmap_open(getpid(), fake), -ENOENT);
	ASSERT_OK(mkfifo(path, 0600));
	ASSERT_EQ(pt_perfmap_open(getpid(), fake), -EINVAL);
	unlink(path);
	ASSERT_OK(write_file(path, "1000 10 here\n"));
	int fd = pt_perfmap_open(getpid(), fake);
	ASSERT(fd >= 0);
	ASSERT_STR_EQ(read_fd(fd), "1000 10 here\n");
	close(fd);
	unlink(path);
}

/* A target in its own root makes its perf map a symlink to an absolute
 * path. The link must resolve inside the target's root: followed in ours
 * it would hand our files (a service-account token) to the profile. */
TEST(perfmap_open_resolves_symlinks_inside_the_target_root)
{
	char root[] = "/tmp/podprof-root-XXXXXX", p[256], outside[128];
	int sync[2], fd;
	pid_t child;
	char c;

	if (geteuid() != 0)
		SKIP("needs root to chroot a fake target");
	ASSERT(mkdtemp(root));
	snprintf(outside, sizeof(outside), "/tmp/podprof-outside-%d", (int)getpid());
	ASSERT_OK(write_file(outside, "1000 10 OUR_SECRET\n"));
	snprintf(p, sizeof(p), "%s/tmp", root);
	ASSERT_OK(mkdir(p, 0755));
	snprintf(p, sizeof(p), "%s%s", root, outside);
	ASSERT_OK(write_file(p, "1000 10 inside_the_target\n"));
	snprintf(p, sizeof(p), "%s/tmp/perf-77.map", root);
	ASSERT_OK(symlink(outside, p));
	ASSERT_OK(pipe(sync));
	child = fork();
	if (child == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);   /* dies with the test, however it ends */
		if (chroot(root) || chdir("/"))
			_exit(1);
		if (write(sync[1], "x", 1) != 1)
			_exit(1);
		for (;;)
			pause();
	}
	ASSERT_EQ(read(sync[0], &c, 1), 1);
	fd = pt_perfmap_open(child, 77);
	kill(child, SIGKILL);
	waitpid(child, NULL, 0);
	ASSERT(fd >= 0);
	ASSERT_STR_EQ(read_fd(fd), "1000 10 inside_the_target\n");
	close(fd);
	unlink(outside);
	unlink(p);
	snprintf(p, sizeof(p), "%s%s", root, outside);
	unlink(p);
	snprintf(p, sizeof(p), "%s/tmp", root);
	rmdir(p);
	rmdir(root);
}
