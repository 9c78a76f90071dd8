/* Declarations shared only inside ptrace/ (CONVENTIONS H1). Any thread. */
#ifndef PT_INTERNAL_H
#define PT_INTERNAL_H

#include <stdint.h>
#include <string.h>
#include <sys/types.h>
#include <time.h>

/* Clock `id` in ns; 0 if it cannot be read (a CPU clock of a process gone). */
static inline uint64_t pt__clock_ns(clockid_t id)
{
	struct timespec ts;

	if (clock_gettime(id, &ts))
		return 0;
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* The CPU time process pid used so far, all its threads, the ended ones
 * too (its CPUCLOCK_SCHED clock); while it is a zombie, all it used; 0 once
 * it is reaped. */
static inline uint64_t pt__process_cpu_ns(pid_t pid)
{
	return pt__clock_ns((clockid_t)((~(unsigned int)pid << 3) | 2));
}

/* CLOCK_MONOTONIC, for intervals. */
static inline uint64_t pt__now_ns(void)
{
	return pt__clock_ns(CLOCK_MONOTONIC);
}

/* CLOCK_REALTIME, for time stamps in profiles. */
static inline uint64_t pt__wall_ns(void)
{
	return pt__clock_ns(CLOCK_REALTIME);
}

/* Little-endian words from a byte buffer (target memory, file tables). */
static inline uint32_t pt__rd32(const uint8_t *p)
{
	uint32_t v;

	memcpy(&v, p, sizeof(v));
	return v;
}

static inline uint64_t pt__rd64(const uint8_t *p)
{
	uint64_t v;

	memcpy(&v, p, sizeof(v));
	return v;
}

#endif
