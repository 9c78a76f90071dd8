/* A traced thread's /proc files and their readers: what the mechanism and
 * the sampling rule know of a thread without stopping it. Each file is
 * opened once, when the thread is added (or exec's), and read with one
 * pread: a thread of a busy target is looked at up to a thousand times a
 * second, and an open and close each time would triple the cost. Sampler
 * thread only. */

#include "ptrace/mechanism/thread.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "ptrace/proc/proc.h"
#include "ptrace/core/internal.h"

ssize_t pt__thread_pread(int fd, char *buf, size_t len)
{
	ssize_t n = fd >= 0 ? pread(fd, buf, len - 1, 0) : -1;

	if (n >= 0)
		buf[n] = '\0';
	return n;
}

ssize_t pt__thread_pread_own(int *fd, const char *path, char *buf, size_t len)
{
	if (*fd < 0)
		*fd = open(path, O_RDONLY | O_CLOEXEC);
	return pt__thread_pread(*fd, buf, len);
}

static int open_task_file(const struct pt_thread *th, const char *name)
{
	char path[96];

	snprintf(path, sizeof(path), "/proc/%d/task/%d/%s", (int)th->pid, (int)th->tid, name);
	return open(path, O_RDONLY | O_CLOEXEC);
}

void pt_thread_close(struct pt_thread *th)
{
	if (th->sys_fd >= 0)
		close(th->sys_fd);
	if (th->sched_fd >= 0)
		close(th->sched_fd);
	if (th->stat_fd >= 0)
		close(th->stat_fd);
	th->sys_fd = th->sched_fd = th->stat_fd = -1;
}

static void open_files(struct pt_thread *th)
{
	pt_thread_close(th);
	th->flags &= ~PT_TH_UNOPENED;
	th->sys_fd = open_task_file(th, "syscall");
	if (th->sys_fd < 0)
		th->stat_fd = open_task_file(th, "stat");
	th->sched_fd = open_task_file(th, "schedstat");
}

/* A thread born while traced gets its files at its first read. */
static void need_files(struct pt_thread *th)
{
	if (th->flags & PT_TH_UNOPENED)
		open_files(th);
}

/* From now, no CPU and no wait counted yet. */
static void opened_now(struct pt_thread *th)
{
	th->opened_ns = pt__now_ns();
	th->open_run_ns = th->open_wait_ns = th->comm_ns = 0;
}

void pt_thread_open(struct pt_thread *th)
{
	open_files(th);
	opened_now(th);
	if (th->sched_fd >= 0)
		pt_thread_read_sched(th, &th->open_run_ns, &th->open_wait_ns, NULL);
}

int pt_thread_stat_only(struct pt_thread *th)
{
	need_files(th);
	return th->sys_fd < 0;
}

void pt_thread_open_later(struct pt_thread *th)
{
	pt_thread_close(th);
	th->flags |= PT_TH_UNOPENED;
	opened_now(th);
}

int pt_thread_read_sched(struct pt_thread *th, uint64_t *run_ns, uint64_t *wait_ns,
			 uint64_t *slices)
{
	char buf[128];

	need_files(th);
	if (pt__thread_pread(th->sched_fd, buf, sizeof(buf)) <= 0)
		return -ESRCH;
	return pt_proc_parse_schedstat(buf, run_ns, wait_ns, slices) ? -EBADMSG : 0;
}

int pt_thread_read_sched_end(const struct pt_thread *th, uint64_t *run_ns, uint64_t *wait_ns)
{
	char path[96], buf[128];

	snprintf(path, sizeof(path), "/proc/%d/task/%d/schedstat", (int)th->pid, (int)th->tid);
	if ((th->sched_fd >= 0 ? pt__thread_pread(th->sched_fd, buf, sizeof(buf))
			       : pt_proc_slurp(path, buf, sizeof(buf))) <= 0)
		return -ESRCH;
	return pt_proc_parse_schedstat(buf, run_ns, wait_ns, NULL) ? -EBADMSG : 0;
}

int pt_thread_read_stat(const struct pt_thread *th, struct pt_stat *st)
{
	char path[96], buf[512];

	snprintf(path, sizeof(path), "/proc/%d/task/%d/stat", (int)th->pid, (int)th->tid);
	if (pt_proc_slurp(path, buf, sizeof(buf)) <= 0 || pt_proc_parse_stat(buf, st))
		return -ESRCH;
	return 0;
}

/* th's stat, through stat_fd where it is open. Returns 0 or -ESRCH. */
static int read_own_stat(struct pt_thread *th, struct pt_stat *st)
{
	char buf[512];

	need_files(th);
	if (th->stat_fd >= 0)
		return pt__thread_pread(th->stat_fd, buf, sizeof(buf)) <= 0 ||
		       pt_proc_parse_stat(buf, st) ? -ESRCH : 0;
	return pt_thread_read_stat(th, st);
}

int pt_thread_read_state(struct pt_thread *th)
{
	struct pt_stat st;

	if (read_own_stat(th, &st))
		return -ESRCH;
	th->state = st.state;
	snprintf(th->comm, sizeof(th->comm), "%.15s", st.comm);  /* TASK_COMM_LEN */
	th->comm_ns = pt__now_ns();
	return 0;
}

int pt_thread_read_kernel_ns(struct pt_thread *th, uint64_t *ns)
{
	long hz = sysconf(_SC_CLK_TCK);   /* the auxiliary vector's: no system call */
	struct pt_stat st;

	if (hz <= 0)
		hz = 100;
	if (read_own_stat(th, &st))
		return -ESRCH;
	*ns = st.stime * (1000000000ull / (uint64_t)hz);
	return 0;
}

int pt_thread_running(struct pt_thread *th)
{
	char buf[16];
	ssize_t n;

	need_files(th);
	if (th->sys_fd < 0)   /* another uid's thread: its stat (see pt_thread_open) */
		return !pt_thread_read_state(th) && th->state == 'R';
	n = pread(th->sys_fd, buf, sizeof(buf), 0);
	if (n < 7 || memcmp(buf, "running", 7))
		return 0;
	/* Threads rename themselves rarely, and mostly right after they start. */
	if (!th->comm[0] || pt__now_ns() - th->comm_ns > 1000000000ull)
		pt_thread_read_state(th);
	th->state = 'R';
	return 1;
}

int pt_thread_read_syscall(struct pt_thread *th, long *nr, uint64_t *sp, uint64_t *pc)
{
	char buf[256];

	need_files(th);
	if (pt__thread_pread(th->sys_fd, buf, sizeof(buf)) <= 0)
		return -ESRCH;
	if (!strncmp(buf, "running", 7))
		return 1;
	return pt_proc_parse_syscall(buf, nr, sp, pc) ? -EBADMSG : 0;
}

void pt_thread_note_signal(struct pt_thread *th)
{
	uint64_t run;

	if (!pt_thread_read_sched(th, &run, NULL, &th->sig_slices))
		th->flags |= PT_TH_SIGNALLED;
}

int pt_thread_signal_pending(struct pt_thread *th, uint64_t slices)
{
	if (!(th->flags & PT_TH_SIGNALLED))
		return 0;
	if (slices == th->sig_slices)
		return 1;
	th->flags &= ~PT_TH_SIGNALLED;
	return 0;
}
