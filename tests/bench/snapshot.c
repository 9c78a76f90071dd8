/* bench-snapshot PID REPS: times podprof's one-shot thread dump through the
 * sampler's own API (the snapshot the goroutine endpoint serves), to set
 * beside `eu-stack -p PID`. Prints one line:
 *   cold_ms=<median> warm_ms=<median> threads=<n> frames=<n> stopped_warm=<n>
 * cold: a fresh sampler each time: attach, stop and unwind every thread,
 * symbolize, detach (what eu-stack does). warm: already attached, threads
 * blocked since the last dump reuse their stacks. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ptrace/sampler/sampler.h"
#include "ptrace/sessions/threads.h"

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
static int done;

static void on_done(struct pt_request *req, void *arg)
{
	(void)req;
	(void)arg;
	pthread_mutex_lock(&lock);
	done = 1;
	pthread_cond_signal(&cond);
	pthread_mutex_unlock(&lock);
}

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* One snapshot; returns its profile (caller frees) or exits on error. */
static struct pt_profile *snapshot(struct pt_sampler *s, pid_t pid)
{
	struct pt_request req;

	memset(&req, 0, sizeof(req));
	req.kind = &pt_kind_threads;
	req.pid = pid;
	done = 0;
	pt_sampler_submit(s, &req);
	pthread_mutex_lock(&lock);
	while (!done)
		pthread_cond_wait(&cond, &lock);
	pthread_mutex_unlock(&lock);
	if (req.err) {
		fprintf(stderr, "bench-snapshot: %s\n", strerror(-req.err));
		exit(1);
	}
	return req.profile;
}

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
	struct pt_sampler_opts o = {
		.stack_bytes = 65536, .max_frames = 256, .max_threads = 16384, .max_per_tick = 64, .spin_ns = 50000,
		.max_sessions = 4, .max_stacks = 200000, .detach_grace_ns = 0,
	};
	double cold[64], warm[64];
	size_t threads = 0, frames = 0;
	uint64_t stopped = 0;
	struct pt_sampler *s;
	sigset_t set;
	pid_t pid;
	int reps;

	if (argc != 3 || (pid = atoi(argv[1])) <= 0 || (reps = atoi(argv[2])) < 1 || reps > 64) {
		fprintf(stderr, "usage: bench-snapshot PID REPS (1..64)\n");
		return 2;
	}
	sigemptyset(&set);
	sigaddset(&set, SIGCHLD);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	for (int r = 0; r < reps; r++) {
		double t0 = now_ms();
		struct pt_profile *p;

		if (pt_sampler_new(&s, &o, on_done, NULL, NULL))
			return 1;
		p = snapshot(s, pid);
		pt_sampler_free(s);   /* detaches */
		cold[r] = now_ms() - t0;
		threads = p->nsamples;
		frames = 0;
		for (size_t i = 0; i < p->nsamples; i++)
			frames += p->samples[i].n;
		pt_profile_free(p);
	}
	o.detach_grace_ns = 60000000000ull;   /* stay attached between the warm dumps */
	if (pt_sampler_new(&s, &o, on_done, NULL, NULL))
		return 1;
	pt_profile_free(snapshot(s, pid));
	for (int r = 0; r < reps; r++) {
		double t0 = now_ms();
		struct pt_profile *p = snapshot(s, pid);

		warm[r] = now_ms() - t0;
		stopped = p->threads_stopped;
		pt_profile_free(p);
	}
	pt_sampler_free(s);
	qsort(cold, (size_t)reps, sizeof(double), cmp_d);
	qsort(warm, (size_t)reps, sizeof(double), cmp_d);
	printf("cold_ms=%.3f warm_ms=%.3f threads=%zu frames=%zu stopped_warm=%llu\n", cold[reps / 2],
	       warm[reps / 2], threads, frames, (unsigned long long)stopped);
	return 0;
}
