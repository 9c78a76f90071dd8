/* A thread sampled by the kernel: its cpu-clock event and ring buffer
 * (perf_event_open(2), include/uapi/linux/perf_event.h). The layout of a
 * sample follows from the sample_type we ask for (TID, TIME, READ,
 * REGS_USER, STACK_USER, in that order in the record). Sampler thread
 * only. */
#include "ptrace/perf/perfev.h"

#include <errno.h>
#include <linux/perf_event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/user.h>
#include <time.h>
#include <unistd.h>

#include "base/mem.h"
#include "ptrace/perf/ring.h"
#include "ptrace/proc/proc.h"

/* The user registers each sample carries: AX BX CX DX SI DI BP SP IP FLAGS
 * CS SS (bits 0-11) and R8-R15 (16-23); DS-GS (12-15) are refused by the
 * kernel (arch/x86/kernel/perf_regs.c). As perf and ddprof ask. */
#define PT_PERFEV_REGS 0xff0fffull
#define NREGS 20
enum { R_AX, R_BX, R_CX, R_DX, R_SI, R_DI, R_BP, R_SP, R_IP, R_FLAGS, R_CS, R_SS,
       R_R8, R_R9, R_R10, R_R11, R_R12, R_R13, R_R14, R_R15 };

#define SAMPLE_TYPE (PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_READ | \
		     PERF_SAMPLE_REGS_USER | PERF_SAMPLE_STACK_USER)
/* header, pid/tid, time, count, abi, registers, size, dyn_size */
#define RECORD_FIXED (8 + 8 + 8 + 8 + 8 + 8 * NREGS + 8 + 8)

struct pt_perfev {
	int fd;
	struct pt_ring ring;
	size_t stack_bytes;
	void (*on_fork)(void *arg, pid_t parent, pid_t child, uint64_t born_ns);   /* cfg->task */
	void *fork_arg;
};

int pt__perfev_sys_open(struct perf_event_attr *attr, pid_t tid, int cpu)
{
	return (int)syscall(SYS_perf_event_open, attr, tid, cpu, -1, PERF_FLAG_FD_CLOEXEC);
}

/* The attributes of cfg's event, woken when `wake` bytes are written.
 * Enabled, no inherit. */
static void event_attr(struct perf_event_attr *a, const struct pt_perfev_cfg *cfg, uint64_t wake)
{
	memset(a, 0, sizeof(*a));
	a->size = sizeof(*a);
	a->type = PERF_TYPE_SOFTWARE;
	a->config = PERF_COUNT_SW_CPU_CLOCK;
	a->sample_period = cfg->period_ns;
	a->sample_type = SAMPLE_TYPE;
	a->read_format = 0;   /* the count alone */
	a->sample_regs_user = PT_PERFEV_REGS;
	a->sample_stack_user = (uint32_t)cfg->stack_bytes;
	a->exclude_kernel = cfg->exclude_kernel ? 1 : 0;
	a->task = cfg->on_fork ? 1 : 0;   /* FORK (and EXIT) records of the thread */
	a->exclude_hv = 1;
	a->use_clockid = 1;
	a->clockid = CLOCK_MONOTONIC;
	/* Nobody sleeps on the fd (the sampler drains at its ticks): wake
	 * only when the ring is nearly full, sparing the target's core the
	 * wake-up work the kernel queues after each sample otherwise. */
	a->watermark = 1;
	a->wakeup_watermark = (uint32_t)wake;
}

/* The size of a sample record of stack_bytes. */
static size_t record_size(size_t stack_bytes)
{
	return RECORD_FIXED + stack_bytes;
}

int pt_perfev_open_forks(struct pt_perfev **out, pid_t tid, const struct pt_perfev_cfg *cfg)
{
	/* a FORK record with its time (no sample_id_all), its ring's one page */
	const size_t rec = sizeof(struct perf_event_header) + 4 * 4 + 8;
	size_t pgsz = (size_t)sysconf(_SC_PAGESIZE);
	struct perf_event_attr a;
	struct pt_perfev *e;
	int err;

	*out = NULL;
	if (!cfg->on_fork)
		return -EINVAL;
	if (!(e = base_calloc(1, sizeof(*e))))
		return -ENOMEM;
	e->fd = -1;
	e->on_fork = cfg->on_fork;
	e->fork_arg = cfg->fork_arg;
	memset(&a, 0, sizeof(a));
	a.size = sizeof(a);
	a.type = PERF_TYPE_SOFTWARE;
	a.config = PERF_COUNT_SW_DUMMY;   /* counts nothing, samples nothing */
	a.exclude_kernel = cfg->exclude_kernel ? 1 : 0;
	a.exclude_hv = 1;
	a.task = 1;
	a.use_clockid = 1;   /* the FORK records' time: the thread's birth, */
	a.clockid = CLOCK_MONOTONIC;   /* on the clock podprof reads */
	/* Woken at every record: wakeup_events counts samples only, and a
	 * FORK record alone woke nobody with it. */
	a.watermark = 1;
	a.wakeup_watermark = 1;
	if ((e->fd = pt__perfev_sys_open(&a, tid, -1)) < 0) {
		err = -errno;
		base_free(e);
		return err;
	}
	if ((err = pt__ring_map(&e->ring, e->fd, pgsz, rec))) {
		pt_perfev_close(e);
		return err;
	}
	*out = e;
	return 0;
}

int pt_perfev_fd(const struct pt_perfev *e)
{
	return e->fd;
}

int pt_perfev_open(struct pt_perfev **out, pid_t tid, const struct pt_perfev_cfg *cfg)
{
	struct perf_event_attr a;
	struct pt_perfev *e;
	size_t rec, pgsz = (size_t)sysconf(_SC_PAGESIZE), pages = 2;
	int err;

	*out = NULL;
	if (cfg->stack_bytes % 8 || cfg->stack_bytes > PT_PERFEV_MAX_STACK || !cfg->period_ns)
		return -EINVAL;
	rec = record_size(cfg->stack_bytes);
	/* Room for what the caller drains at once, and more for a drain
	 * that comes late on a loaded machine. */
	while (pages * pgsz < (cfg->ring_samples ? cfg->ring_samples : 3) * rec)
		pages *= 2;
	if (!(e = base_calloc(1, sizeof(*e))))
		return -ENOMEM;
	e->fd = -1;
	e->stack_bytes = cfg->stack_bytes;
	e->on_fork = cfg->on_fork;
	e->fork_arg = cfg->fork_arg;
	event_attr(&a, cfg, pages * pgsz - rec);
	if ((e->fd = pt__perfev_sys_open(&a, tid, -1)) < 0) {
		err = -errno;
		base_free(e);
		return err;
	}
	if ((err = pt__ring_map(&e->ring, e->fd, pages * pgsz, rec))) {
		pt_perfev_close(e);
		return err;
	}
	*out = e;
	return 0;
}

void pt_perfev_close(struct pt_perfev *e)
{
	if (!e)
		return;
	pt__ring_unmap(&e->ring);
	if (e->fd >= 0)
		close(e->fd);
	base_free(e);
}

int pt_perfev_enable(struct pt_perfev *e, int on)
{
	return ioctl(e->fd, on ? PERF_EVENT_IOC_ENABLE : PERF_EVENT_IOC_DISABLE, 0) ? -errno : 0;
}

int pt_perfev_set_period(struct pt_perfev *e, uint64_t period_ns)
{
	return ioctl(e->fd, PERF_EVENT_IOC_PERIOD, &period_ns) ? -errno : 0;
}

int pt_perfev_count(struct pt_perfev *e, uint64_t *ns)
{
	ssize_t n = read(e->fd, ns, sizeof(*ns));

	return n == (ssize_t)sizeof(*ns) ? 0 : n < 0 ? -errno : -EIO;
}

int pt_perfev_pending(const struct pt_perfev *e)
{
	return pt__ring_pending(&e->ring);
}

size_t pt_perfev_stack_bytes(const struct pt_perfev *e)
{
	return e->stack_bytes;
}

void pt_perfev_regs(const struct pt_perfev_sample *smp, struct user_regs_struct *out)
{
	const uint64_t *r = smp->regs;

	memset(out, 0, sizeof(*out));
	out->rax = r[R_AX];
	out->rbx = r[R_BX];
	out->rcx = r[R_CX];
	out->rdx = r[R_DX];
	out->rsi = r[R_SI];
	out->rdi = r[R_DI];
	out->rbp = r[R_BP];
	out->rsp = r[R_SP];
	out->rip = r[R_IP];
	out->eflags = r[R_FLAGS];
	out->cs = r[R_CS];
	out->ss = r[R_SS];
	out->r8 = r[R_R8];
	out->r9 = r[R_R9];
	out->r10 = r[R_R10];
	out->r11 = r[R_R11];
	out->r12 = r[R_R12];
	out->r13 = r[R_R13];
	out->r14 = r[R_R14];
	out->r15 = r[R_R15];
	out->orig_rax = (unsigned long long)-1;   /* not in a sample: no system call known */
}

/* Parses a whole sample record (its header included), laid out as
 * SAMPLE_TYPE asks. 0 or -EBADMSG. */
static int parse(const uint8_t *p, size_t len, struct pt_perfev_sample *smp)
{
	const uint8_t *end = p + len;
	uint64_t abi, size;
	uint32_t ids[2];

#define TAKE(dst, n) do { if ((size_t)(end - p) < (n)) return -EBADMSG; \
			  memcpy((dst), p, (n)); p += (n); } while (0)
	p += sizeof(struct perf_event_header);
	TAKE(ids, 8);
	smp->pid = (pid_t)ids[0];
	smp->tid = (pid_t)ids[1];
	TAKE(&smp->time_ns, 8);
	TAKE(&smp->count, 8);
	TAKE(&abi, 8);
	smp->has_regs = abi != PERF_SAMPLE_REGS_ABI_NONE;
	if (smp->has_regs)
		TAKE(smp->regs, 8 * NREGS);
	else
		memset(smp->regs, 0, sizeof(smp->regs));
	TAKE(&size, 8);
	if (size > (size_t)(end - p))
		return -EBADMSG;
	smp->stack = p;
	p += size;
	smp->stack_len = 0;
	smp->stack_whole = 1;
	if (size) {
		uint64_t dyn;

		TAKE(&dyn, 8);
		smp->stack_len = dyn < size ? (size_t)dyn : (size_t)size;
		smp->stack_whole = dyn < size;
	}
#undef TAKE
	return 0;
}

struct drain {
	struct pt_perfev *e;
	int (*fn)(void *arg, const struct pt_perfev_sample *smp);
	void *arg;
	int n;
};

static int on_record(void *arg, uint32_t type, const uint8_t *rec, size_t len)
{
	struct drain *d = arg;
	struct pt_perfev_sample smp;

	if (type == PERF_RECORD_FORK && d->e->on_fork) {
		uint32_t ids[4];   /* pid, ppid, tid, ptid, then the time */
		uint64_t time = 0;

		if (len < sizeof(struct perf_event_header) + sizeof(ids))
			return -1;
		memcpy(ids, rec + sizeof(struct perf_event_header), sizeof(ids));
		if (len >= sizeof(struct perf_event_header) + sizeof(ids) + sizeof(time))
			memcpy(&time, rec + sizeof(struct perf_event_header) + sizeof(ids), sizeof(time));
		if (ids[0] == ids[1])   /* a thread, not a process */
			d->e->on_fork(d->e->fork_arg, (pid_t)ids[3], (pid_t)ids[2], time);
		return 0;
	}
	if (type != PERF_RECORD_SAMPLE)
		return 0;
	if (parse(rec, len, &smp))
		return -1;
	if (d->fn && d->fn(d->arg, &smp))
		return 1;   /* left for the next drain */
	d->n++;
	return 0;
}

int pt_perfev_drain(struct pt_perfev *e, int (*fn)(void *arg, const struct pt_perfev_sample *smp),
		    void *arg, uint64_t *lost)
{
	struct drain d = { e, fn, arg, 0 };
	int err = pt__ring_read(&e->ring, on_record, &d, lost);

	return err ? err : d.n;
}

static int read_paranoid(void)
{
	char buf[32];

	if (pt_proc_slurp("/proc/sys/kernel/perf_event_paranoid", buf, sizeof(buf)) <= 0)
		return 99;
	return (int)strtol(buf, NULL, 10);
}

/* 1 if this thread holds CAP_PERFMON (38) or CAP_SYS_ADMIN (21). */
static int perfmon_capable(void)
{
	char buf[4096], *cap;
	unsigned long long eff;

	if (pt_proc_slurp("/proc/thread-self/status", buf, sizeof(buf)) <= 0 ||
	    !(cap = strstr(buf, "\nCapEff:")))
		return 0;
	eff = strtoull(cap + 8, NULL, 16);
	return !!(eff & (1ull << 38 | 1ull << 21));
}

int pt_perfev_probe(pid_t tid, struct pt_perfev_cfg *cfg, char *why, size_t len)
{
	struct perf_event_attr a;
	int paranoid = read_paranoid(), fd, err;
	char lvl[32];

	if (paranoid == 99)
		snprintf(lvl, sizeof(lvl), "unreadable");
	else
		snprintf(lvl, sizeof(lvl), "%d", paranoid);
	for (int excl = 0; excl < 2; excl++) {
		struct pt_perfev_cfg c = *cfg;

		c.exclude_kernel = excl;
		event_attr(&a, &c, 0);
		a.disabled = 1;
		if ((fd = pt__perfev_sys_open(&a, tid, -1)) >= 0) {
			close(fd);
			cfg->exclude_kernel = excl;
			if (why && !excl)
				snprintf(why, len, "perf_event_open allowed, kernel time included (%s)",
					 perfmon_capable() ? "CAP_PERFMON or CAP_SYS_ADMIN held" :
					 "perf_event_paranoid below 2");
			else if (why)
				snprintf(why, len, "perf_event_open allowed for user time only "
					 "(perf_event_paranoid %s, no CAP_PERFMON): the CPU a thread spends "
					 "in the kernel is carried by its next sample", lvl);
			return 0;
		}
		err = -errno;
		if (err != -EACCES && err != -EPERM)
			break;
	}
	if (why) {
		const char *hint =
			err == -ENOSYS || err == -ENOENT ? "this kernel has no perf events" :
			err == -ESRCH ? "the thread is gone" :
			err == -EPERM ? "a seccomp filter refuses it (Docker's and containerd's default "
					"profiles allow it only with CAP_PERFMON or CAP_SYS_ADMIN) or a "
					"capability is missing" :
			paranoid >= 3 && paranoid != 99 ?
				"perf_event_paranoid above 2 (Debian's and Ubuntu's kernels) allows it "
				"only with CAP_PERFMON or CAP_SYS_ADMIN" :
			"not allowed for this target (another user's process needs CAP_PERFMON)";

		snprintf(why, len, "perf_event_open refused: %s (perf_event_paranoid %s): %s",
			 strerror(-err), lvl, hint);
	}
	return err;
}
