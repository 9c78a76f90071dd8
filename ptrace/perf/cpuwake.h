/* A thread stopped by the CPU it uses, not by the clock on the wall: a
 * counting cpu-clock event on that thread alone that signals it when it has
 * used a period of CPU (perf_event_open(2): O_ASYNC with F_SETOWN_EX
 * F_OWNER_TID and F_SETSIG; PERF_EVENT_IOC_REFRESH 1 arms it for one
 * overflow, at which the kernel disables it and the signal's si_code says
 * POLL_HUP, its si_fd this event). A traced thread then enters a
 * signal-delivery stop where it runs: the tracer tells the signal apart from
 * any of the target's own (pt_cpuwake_ours), takes its sample, resumes the
 * thread with no signal and arms the event again. No ring is mapped: the
 * signal is the sample's whole message. The way the ptrace backend would
 * sample a short thread (CPython's thread per request) by the CPU it used
 * (docs/ARCHITECTURE.md, new threads without a stop). Knows nothing of
 * tracees or sessions; sampler thread only. */
#ifndef PT_CPUWAKE_H
#define PT_CPUWAKE_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* The signal to use for the threads of process pid: SIGURG, else SIGWINCH
 * if the process catches SIGURG and not SIGWINCH (/proc/<pid>/status
 * SigCgt). Both are ignored by default, so one left pending when podprof
 * is gone does nothing to a process that does not catch it; the tracer
 * suppresses every one of its own, so a handler never sees them while
 * traced. Returns the signal; why (if not NULL) says which and why. */
int pt_cpuwake_signal(pid_t pid, char *why, size_t len);

/* Opens tid's event, armed: tid is signalled `sig` once it has used
 * first_ns of CPU from now (kernel time counted too unless exclude_kernel).
 * Returns the event's fd or a negative errno: -EINVAL (a period under
 * 10 us, the kernel's least; a bad signal), -ESRCH (gone), -EACCES/-EPERM
 * (not allowed), -EMFILE. */
int pt_cpuwake_open(pid_t tid, int sig, uint64_t first_ns, int exclude_kernel);
/* Arms fd for one more signal, after period_ns more of the thread's CPU
 * (called in the stop its signal made, before the thread is resumed: the
 * event disabled itself at the signal and counts nothing until armed).
 * Returns 0 or -errno. */
int pt_cpuwake_arm(int fd, uint64_t period_ns);
/* 1 if si (PTRACE_GETSIGINFO at a signal-delivery stop) is fd's signal:
 * sent by the kernel for this event's overflow, not by anyone's kill or
 * by another fd of the target's own. */
int pt_cpuwake_ours(const siginfo_t *si, int sig, int fd);
/* The thread's CPU the event counted, in ns. Returns 0 or -errno. */
int pt_cpuwake_count(int fd, uint64_t *ns);

#endif
