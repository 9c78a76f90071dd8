/* A thread stopped by the CPU it uses (see cpuwake.h). */
#include "ptrace/perf/cpuwake.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/perf_event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "ptrace/perf/perfev.h"
#include "ptrace/proc/proc.h"

#define MIN_PERIOD_NS 10000ull   /* the kernel's least hrtimer period */

/* The signals process pid catches, from its status (0: unread). */
static uint64_t caught(pid_t pid)
{
	char path[64], buf[4096], *p;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	if (pt_proc_slurp(path, buf, sizeof(buf)) <= 0 || !(p = strstr(buf, "\nSigCgt:")))
		return 0;
	return strtoull(p + 8, NULL, 16);
}

int pt_cpuwake_signal(pid_t pid, char *why, size_t len)
{
	uint64_t cgt = caught(pid);
	int urg = !!(cgt & (1ull << (SIGURG - 1))), winch = !!(cgt & (1ull << (SIGWINCH - 1)));
	int sig = urg && !winch ? SIGWINCH : SIGURG;

	if (why)
		snprintf(why, len, "%s%s", sig == SIGURG ? "SIGURG" : "SIGWINCH",
			 urg && winch ? " (the target catches SIGURG and SIGWINCH: a pending one "
					"left behind would reach its handler)" :
			 urg ? " (the target catches SIGURG)" : "");
	return sig;
}

int pt_cpuwake_open(pid_t tid, int sig, uint64_t first_ns, int exclude_kernel)
{
	struct perf_event_attr a;
	struct f_owner_ex owner = { .type = F_OWNER_TID, .pid = tid };
	int fd, err;

	if (first_ns < MIN_PERIOD_NS || sig <= 0 || sig >= NSIG)
		return -EINVAL;
	memset(&a, 0, sizeof(a));
	a.size = sizeof(a);
	a.type = PERF_TYPE_SOFTWARE;
	a.config = PERF_COUNT_SW_CPU_CLOCK;
	a.sample_period = first_ns;
	a.disabled = 1;           /* until armed below, its owner and signal set */
	a.exclude_kernel = exclude_kernel ? 1 : 0;
	a.exclude_hv = 1;
	if ((fd = pt__perfev_sys_open(&a, tid, -1)) < 0)
		return -errno;
	/* The signal goes to the thread that overflowed, as a fixed signal
	 * with its si_fd (F_SETSIG), not SIGIO to the process. */
	if (fcntl(fd, F_SETOWN_EX, &owner) || fcntl(fd, F_SETSIG, sig) ||
	    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_ASYNC) ||
	    ioctl(fd, PERF_EVENT_IOC_REFRESH, 1)) {
		err = -errno;
		close(fd);
		return err;
	}
	return fd;
}

int pt_cpuwake_arm(int fd, uint64_t period_ns)
{
	if (period_ns < MIN_PERIOD_NS)
		return -EINVAL;
	/* (a new period restarts the count toward it: set while the event is
	 * off, between its signal and this arming, it is the next whole one) */
	if (ioctl(fd, PERF_EVENT_IOC_PERIOD, &period_ns) || ioctl(fd, PERF_EVENT_IOC_REFRESH, 1))
		return -errno;
	return 0;
}

int pt_cpuwake_ours(const siginfo_t *si, int sig, int fd)
{
	return si->si_signo == sig && si->si_code == POLL_HUP && si->si_fd == fd;
}

int pt_cpuwake_count(int fd, uint64_t *ns)
{
	return read(fd, ns, sizeof(*ns)) == (ssize_t)sizeof(*ns) ? 0 : -EIO;
}
