/* A process-wide override of libc's sigprocmask(), for libunwind's sake.
 *
 * libunwind as Debian builds it (1.6, no per-thread cache) guards its cache
 * of register states with a global lock and blocks every signal around it
 * with sigprocmask(): two system calls per unwind step, most of an unwind's
 * time (5.4 us per stack; 1.0 us with this override, A/B in one run, see
 * docs/BENCHMARKS.md). No signal handler of ours unwinds, so the lock needs
 * no protection from signals on the thread that unwinds: while that thread
 * is inside pt_unwind() (pt__sigmask_fast_begin .. _end), its sigprocmask()
 * calls are answered from the mask it had at begin, without the kernel. Every
 * other call, on any thread, goes to libc's sigprocmask. The unwinding
 * thread's mask does not change meanwhile: nothing in the unwinder changes
 * it for real.
 *
 * This interposes a libc symbol for the whole executable: every caller of
 * sigprocmask in podprof (libuv included) comes through here, which is why it
 * forwards everything outside the window untouched and why the window is a
 * thread-local flag (libunwind calls sigprocmask with no context of ours).
 * Any thread; the window opens only on the sampler thread, in pt_unwind(). */
#include "ptrace/space/sigmask_override.h"

#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

static __thread int unwinding;
static __thread int have_mask;
static __thread sigset_t thread_mask;

int sigprocmask(int how, const sigset_t *set, sigset_t *old)
{
	static int (*real)(int, const sigset_t *, sigset_t *);

	if (!real)
		*(void **)&real = dlsym(RTLD_NEXT, "sigprocmask");
	if (unwinding && have_mask) {
		if (old)
			*old = thread_mask;
		return 0;
	}
	return real ? real(how, set, old) : (int)syscall(SYS_rt_sigprocmask, how, set, old, 8);
}

void pt__sigmask_fast_begin(void)
{
	if (!have_mask)
		have_mask = pthread_sigmask(SIG_BLOCK, NULL, &thread_mask) == 0;
	unwinding = 1;
}

void pt__sigmask_fast_end(void)
{
	unwinding = 0;
}
