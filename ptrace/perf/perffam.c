/* A family of inherited per-CPU events (see perffam.h). Each CPU's ring
 * belongs to the first event opened on that CPU; the later ones of that
 * CPU are redirected into it. */
#include "ptrace/perf/perffam.h"

#include <errno.h>
#include <linux/perf_event.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "base/mem.h"
#include "ptrace/perf/ring.h"
#include "ptrace/proc/proc.h"

#define MAX_CPUS 1024

struct fam_cpu {
	int cpu;
	int owner;            /* the fd whose ring this is, -1: none yet */
	struct pt_ring ring;
};

struct pt_perffam {
	struct pt_perfev_cfg cfg;
	size_t rec;           /* a sample record's size */
	struct fam_cpu *cpus;
	size_t ncpus;
	int *fds;             /* ncpus per thread, in the order added */
	pid_t *tids;
	size_t nthreads, cap;
};

/* The online CPUs, as the kernel lists them ("0-3,8-11"): the ones a
 * thread may run on (an event on an offline CPU is refused). */
static size_t online_cpus(int *out, size_t max)
{
	char buf[4096], *p = buf, *end;
	size_t k = 0;

	if (pt_proc_slurp("/sys/devices/system/cpu/online", buf, sizeof(buf)) <= 0)
		return 0;
	while (*p >= '0' && *p <= '9') {
		long lo = strtol(p, &end, 10), hi = lo;

		p = end;
		if (*p == '-') {
			hi = strtol(p + 1, &end, 10);
			p = end;
		}
		for (long c = lo; c <= hi && k < max; c++)
			out[k++] = (int)c;
		if (*p != ',')
			break;
		p++;
	}
	return k;
}

int pt_perffam_new(struct pt_perffam **out, const struct pt_perfev_cfg *cfg)
{
	struct pt_perffam *f;
	int cpus[MAX_CPUS];
	size_t n;

	*out = NULL;
	if (cfg->stack_bytes % 8 || cfg->stack_bytes > PT_PERFEV_MAX_STACK || !cfg->period_ns ||
	    cfg->on_fork)
		return -EINVAL;
	if (!(n = online_cpus(cpus, MAX_CPUS)))
		return -EINVAL;
	if (!(f = base_calloc(1, sizeof(*f))) || !(f->cpus = base_calloc(n, sizeof(*f->cpus)))) {
		base_free(f);
		return -ENOMEM;
	}
	f->cfg = *cfg;
	f->rec = pt__perfev_record_size(cfg->stack_bytes, 1);
	f->ncpus = n;
	for (size_t i = 0; i < n; i++) {
		f->cpus[i].cpu = cpus[i];
		f->cpus[i].owner = -1;
	}
	*out = f;
	return 0;
}

void pt_perffam_free(struct pt_perffam *f)
{
	if (!f)
		return;
	for (size_t i = 0; i < f->ncpus; i++)
		pt__ring_unmap(&f->cpus[i].ring);
	for (size_t i = 0; i < f->nthreads * f->ncpus; i++)
		if (f->fds[i] >= 0)
			close(f->fds[i]);
	base_free(f->fds);
	base_free(f->tids);
	base_free(f->cpus);
	base_free(f);
}

static int grow(struct pt_perffam *f)
{
	size_t cap = f->cap ? f->cap * 2 : 8;
	int *fds;
	pid_t *tids;

	if (!(fds = base_realloc(f->fds, cap * f->ncpus * sizeof(*fds))))
		return -ENOMEM;
	f->fds = fds;
	if (!(tids = base_realloc(f->tids, cap * sizeof(*tids))))
		return -ENOMEM;
	f->tids = tids;
	f->cap = cap;
	return 0;
}

/* Opens tid's event on CPU slot i into fd, its ring mapped or joined. */
static int open_on_cpu(struct pt_perffam *f, pid_t tid, size_t i, int *fd)
{
	struct fam_cpu *c = &f->cpus[i];
	size_t want = (f->cfg.ring_samples ? f->cfg.ring_samples : 3) * f->rec;
	struct perf_event_attr a;
	int err;

	pt__perfev_attr(&a, &f->cfg, want - f->rec, 1);
	a.inherit = 1;
	a.inherit_thread = 1;    /* threads only: a process it forks is not ours to sample */
	a.remove_on_exec = 1;    /* an exec ends what the events knew of the program */
	if ((*fd = pt__perfev_sys_open(&a, tid, c->cpu)) < 0) {
		int fd2;

		if ((err = -errno) != -EINVAL)
			return err;
		/* Refused as invalid: for want of PERF_SAMPLE_READ with inherit
		 * (before Linux 6.12) if it opens without. */
		a.sample_type &= ~(uint64_t)PERF_SAMPLE_READ;
		if ((fd2 = pt__perfev_sys_open(&a, tid, c->cpu)) < 0)
			return err;
		close(fd2);
		return -EOPNOTSUPP;
	}
	if (c->owner < 0) {
		if ((err = pt__ring_map(&c->ring, *fd, want, f->rec)))
			return err;
		c->owner = *fd;
		return 0;
	}
	return ioctl(*fd, PERF_EVENT_IOC_SET_OUTPUT, c->owner) ? -errno : 0;
}

int pt_perffam_add(struct pt_perffam *f, pid_t tid)
{
	int *fds;
	int err = 0;

	for (size_t i = 0; i < f->nthreads; i++)
		if (f->tids[i] == tid)
			return 0;
	if (f->nthreads == f->cap && (err = grow(f)))
		return err;
	fds = f->fds + f->nthreads * f->ncpus;
	for (size_t i = 0; i < f->ncpus; i++)
		fds[i] = -1;
	for (size_t i = 0; i < f->ncpus && !err; i++)
		err = open_on_cpu(f, tid, i, &fds[i]);
	if (err) {
		/* (a ring this thread's event mapped goes with it) */
		for (size_t i = 0; i < f->ncpus; i++) {
			if (fds[i] < 0)
				continue;
			if (f->cpus[i].owner == fds[i]) {
				pt__ring_unmap(&f->cpus[i].ring);
				f->cpus[i].owner = -1;
			}
			close(fds[i]);
		}
		return err;
	}
	f->tids[f->nthreads++] = tid;
	return 0;
}

size_t pt_perffam_threads(const struct pt_perffam *f)
{
	return f->nthreads;
}

size_t pt_perffam_events(const struct pt_perffam *f)
{
	return f->nthreads * f->ncpus;
}

int pt_perffam_enable(struct pt_perffam *f, int on)
{
	int err = 0;

	for (size_t i = 0; i < f->nthreads * f->ncpus; i++)
		if (ioctl(f->fds[i], on ? PERF_EVENT_IOC_ENABLE : PERF_EVENT_IOC_DISABLE, 0) && !err)
			err = -errno;
	return err;
}

int pt_perffam_set_period(struct pt_perffam *f, uint64_t period_ns)
{
	int err = 0;

	for (size_t i = 0; i < f->nthreads * f->ncpus; i++)
		if (ioctl(f->fds[i], PERF_EVENT_IOC_PERIOD, &period_ns) && !err)
			err = -errno;
	if (!err)
		f->cfg.period_ns = period_ns;
	return err;
}

int pt_perffam_count(struct pt_perffam *f, uint64_t *ns)
{
	*ns = 0;
	for (size_t i = 0; i < f->nthreads * f->ncpus; i++) {
		uint64_t v;

		if (read(f->fds[i], &v, sizeof(v)) != (ssize_t)sizeof(v))
			return -EIO;
		*ns += v;
	}
	return 0;
}

struct drain {
	int (*fn)(void *arg, const struct pt_perfev_sample *smp);
	void *arg;
	int n;
	int stopped;
};

static int on_record(void *arg, uint32_t type, const uint8_t *rec, size_t len)
{
	struct drain *d = arg;
	struct pt_perfev_sample smp;

	if (type != PERF_RECORD_SAMPLE)
		return 0;
	if (pt__perfev_parse(rec, len, 1, &smp))
		return -1;
	if (d->fn && d->fn(d->arg, &smp)) {
		d->stopped = 1;
		return 1;
	}
	d->n++;
	return 0;
}

int pt_perffam_drain(struct pt_perffam *f, int (*fn)(void *arg, const struct pt_perfev_sample *smp),
		     void *arg, uint64_t *lost)
{
	struct drain d = { fn, arg, 0, 0 };
	int err = 0;

	for (size_t i = 0; i < f->ncpus && !d.stopped; i++) {
		if (f->cpus[i].owner < 0)
			continue;
		if ((err = pt__ring_read(&f->cpus[i].ring, on_record, &d, lost)))
			break;
	}
	return err ? err : d.n;
}
