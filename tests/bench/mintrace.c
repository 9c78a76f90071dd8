/* bench-mintrace: the least a ptrace tracer can do, for make bench to set
 * podprof's stop of a new thread beside. It seizes every thread of PID with
 * PTRACE_O_TRACECLONE (as podprof does), so each new thread stops at its
 * birth and its parent at the clone event, and lets every stop go at once:
 * no sample, no /proc read, no stack; it wakes as podprof's sampler does
 * (ppoll on a signalfd for SIGCHLD, then one waitpid per status).
 *   bench-mintrace PID SECONDS
 * Ends after SECONDS (or at SIGTERM/SIGINT), letting every thread go; prints
 * "statuses=N" on stderr. A signal stop passes its signal on; a group-stop
 * stays stopped (PTRACE_LISTEN). */
#include <dirent.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/ptrace.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int is_stop_signal(int sig)
{
	return sig == SIGSTOP || sig == SIGTSTP || sig == SIGTTIN || sig == SIGTTOU;
}

static void let_go(pid_t tid, int status)
{
	int event = status >> 16, sig = WSTOPSIG(status);

	if (event == PTRACE_EVENT_STOP && is_stop_signal(sig))
		ptrace(PTRACE_LISTEN, tid, 0, 0);
	else
		ptrace(PTRACE_CONT, tid, 0, (void *)(long)(event ? 0 : sig));
}

int main(int argc, char **argv)
{
	struct timespec now, end;
	long statuses = 0;
	char path[64];
	sigset_t set;
	DIR *d;
	int fd;

	if (argc != 3 || atoi(argv[1]) <= 0 || atof(argv[2]) <= 0) {
		fprintf(stderr, "usage: bench-mintrace PID SECONDS\n");
		return 2;
	}
	sigemptyset(&set);
	sigaddset(&set, SIGCHLD);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigprocmask(SIG_BLOCK, &set, NULL);
	if ((fd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC)) < 0)
		return perror("signalfd"), 1;
	snprintf(path, sizeof(path), "/proc/%d/task", atoi(argv[1]));
	if (!(d = opendir(path)))
		return perror(path), 1;
	for (struct dirent *e; (e = readdir(d));)
		if (atoi(e->d_name) > 0 &&
		    ptrace(PTRACE_SEIZE, atoi(e->d_name), 0, (void *)(long)PTRACE_O_TRACECLONE) && errno != ESRCH)
			return perror("PTRACE_SEIZE"), 1;
	closedir(d);
	clock_gettime(CLOCK_MONOTONIC, &end);
	end.tv_sec += (time_t)atof(argv[2]);
	end.tv_nsec += (long)((atof(argv[2]) - (double)(time_t)atof(argv[2])) * 1e9);
	if (end.tv_nsec >= 1000000000L)
		end.tv_sec++, end.tv_nsec -= 1000000000L;
	for (;;) {
		struct pollfd pfd = { fd, POLLIN, 0 };
		struct signalfd_siginfo si;
		struct timespec left;
		int status;
		pid_t r;

		clock_gettime(CLOCK_MONOTONIC, &now);
		left.tv_sec = end.tv_sec - now.tv_sec;
		left.tv_nsec = end.tv_nsec - now.tv_nsec;
		if (left.tv_nsec < 0)
			left.tv_sec--, left.tv_nsec += 1000000000L;
		if (left.tv_sec < 0 || ppoll(&pfd, 1, &left, NULL) == 0)
			break;
		if (read(fd, &si, sizeof(si)) == (ssize_t)sizeof(si) && si.ssi_signo != SIGCHLD)
			break;
		while ((r = waitpid(-1, &status, WNOHANG | __WALL)) > 0) {
			statuses++;
			if (WIFSTOPPED(status))
				let_go(r, status);
		}
	}
	fprintf(stderr, "statuses=%ld\n", statuses);
	return 0;   /* our exit detaches every tracee, each stopped one let go */
}
