/* /metrics (see metrics.h): each request formats the table of metrics
 * into a buffer of its own, handed to the HTTP layer. Loop thread only. */
#include "sidecar/pages/metrics.h"

#include <dirent.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/buf.h"
#include "ptrace/proc/proc.h"
#include "ptrace/sampler/sampler.h"
#include "sidecar/server/http.h"
#include "sidecar/server/reply.h"
#include "sidecar/server/server.h"
#include "sidecar/server/util.h"

/* A metric read from a struct pt_sampler_stats field (uint64_t), divided
 * by div (1e9: nanoseconds to seconds). A summary reads four fields: its
 * 0.5 and 0.99 quantiles (over the recent ring, in ns), its _sum (ns, since
 * start) and its _count: the observations the sum adds up. */
struct stat_metric {
	const char *name, *type, *help;
	size_t off, off99, off_sum, off_count;
	double div;
};

#define STAT(f) offsetof(struct pt_sampler_stats, f)
#define COUNTER(n, f, h) { n, "counter", h, STAT(f), 0, 0, 0, 1 }
#define GAUGE(n, f, h)   { n, "gauge", h, STAT(f), 0, 0, 0, 1 }
#define SUMMARY(n, f50, f99, fsum, fcount, h) \
	{ n, "summary", h, STAT(f50), STAT(f99), STAT(fsum), STAT(fcount), 1e9 }

static const struct stat_metric stat_metrics[] = {
	COUNTER("thread_samples_total", thread_samples, "Thread stacks captured by CPU ticks and snapshots."),
	COUNTER("stops_total", stops, "Threads stopped (one at a time) to capture a stack."),
	COUNTER("late_stops_total", late_stops,
		"Threads that stopped after their tick (runnable but not on a core): a CPU tick's are "
		"captured when they stop, a thread dump's resumed without a stack."),
	COUNTER("preempted_stops_total", preempted_stops,
		"CPU-tick stops resumed without a sample: the thread waited for a core and stopped "
		"at the exit of the system call where it was preempted, not where it runs; "
		"it stays due, its CPU counted in its next sample."),
	COUNTER("handler_stops_total", handler_stops,
		"CPU-tick stops resumed without a sample: the thread stood at a signal handler's first "
		"instruction, resumed with its signal and not yet run; it stays due."),
	COUNTER("unpaid_syscall_stops_total", unpaid_stops,
		"CPU-tick stops resumed without a sample: the thread stopped at the exit of a system call "
		"it entered after the interrupt was sent (a slow interrupt), beyond what its kernel time "
		"pays for; it stays due, its CPU counted in its next sample."),
	COUNTER("incomplete_stacks_total", incomplete_stacks,
		"Stacks whose unwind ended before the outermost frame."),
	COUNTER("signals_reinjected_total", signals_reinjected,
		"Signals that arrived while the target was traced, passed on to it."),
	COUNTER("group_stops_total", group_stops, "Group stops (SIGSTOP and the like) honoured."),
	COUNTER("threads_created_total", clones, "Threads the traced targets created while traced."),
	COUNTER("threads_resumed_at_clone_total", clones_resumed_at_once,
		"Of them, those stopped at their birth and let go from that first stop as their parent's "
		"clone event was handled (the others waited for their own stop to be reaped)."),
	COUNTER("threads_adopted_total", threads_adopted,
		"Of them, those followed with no stop at their birth (the perf_event backend): seized "
		"as the kernel's FORK record told of them, or found in /proc/<pid>/task."),
	COUNTER("processes_forked_total", forks, "Processes the traced targets forked while traced."),
	COUNTER("processes_followed_total", forks_followed,
		"Forked processes a profile of several took from their first instruction (tree=1, pid=all)."),
	COUNTER("snapshot_reused_total", snapshot_reused,
		"Thread-dump stacks reused because the thread stayed blocked (no stop)."),
	COUNTER("maps_rereads_total", maps_rereads,
		"Reads of the target's maps forced by an address outside them."),
	COUNTER("stack_copies_short_total", short_copies,
		"Stacks whose unwind needed more than was copied. A stop's: cut short there, and the next "
		"copy is whole. The kernel's (perf_event): the rest read from memory, the next copy sized to it."),
	COUNTER("stack_copies_signal_total", signal_copies,
		"Go stacks interrupted by a signal, copied in the same stop as the signal handler's."),
	COUNTER("perf_samples_total", perf_samples,
		"Samples the kernel took without stopping a thread (the perf_event backend), read from "
		"the ring buffers."),
	COUNTER("perf_stack_bytes_total", perf_stack_bytes,
		"User stack the kernel copied at those samples, on the sampled threads' time (about "
		"0.15 us per KiB): each thread's copy is what its unwinds read and a quarter more."),
	COUNTER("perf_samples_lost_total", perf_lost,
		"Samples the kernel could not write, a ring buffer full (the sampler late): their CPU "
		"is carried by their threads' next samples."),
	COUNTER("perf_open_failures_total", perf_open_failures,
		"Threads whose perf event could not be opened (the open-file or locked-memory limit: "
		"see the log and the profile's comment); their CPU is settled as pending."),
	COUNTER("threads_drawn_total", draw_threads,
		"Threads born while a ptrace profile ran, stopped by the CPU they used (a perf event's "
		"signal) instead of looked for at the ticks (--draw-threads)."),
	COUNTER("draws_total", draws,
		"Those stops: each one a sample standing for a period of its thread's CPU."),
	COUNTER("own_signals_total", own_signals,
		"Signals podprof's own events sent the targets' threads, taken away in the stop they "
		"made: never delivered to the target (one per draw)."),
	COUNTER("ticks_total", ticks, "Sampling ticks run."),
	COUNTER("ticks_late_total", ticks_late,
		"Ticks that started a period or more late (the sampler fell behind; never queued)."),
	/* The pause and unwind times are added up per thread-sample (a stop
	 * whose stack was unwound and reported), so thread_samples is the
	 * _count that matches each _sum; quantiles are over recent samples. */
	SUMMARY("pause_seconds", pause_p50_ns, pause_p99_ns, pause_ns_total, thread_samples,
		"Time a target thread spent stopped by podprof per thread-sample (quantiles: "
		"recent samples; sum and count: since start)."),
	SUMMARY("unwind_seconds", unwind_p50_ns, unwind_p99_ns, unwind_ns_total, thread_samples,
		"Time spent unwinding one captured stack (quantiles: recent samples; sum and "
		"count: since start)."),
	GAUGE("rate_divisor", rate_div,
	      "1, or the factor the sampling rate is lowered by while the sampler is over its CPU budget."),
	COUNTER("rate_changes_total", rate_changes, "Times the sampler lowered or restored its rate."),
	COUNTER("sessions_done_total", sessions_done, "Profiles finished."),
	GAUGE("sessions_active", sessions_active, "Profiles running now."),
	GAUGE("targets_attached", targets_attached, "Processes traced now (0 when idle)."),
	GAUGE("threads_traced", threads_traced, "Threads of the traced processes followed now."),
};

/* A metric of the default target, from its /proc/<pid>/stat. */
struct target_metric {
	const char *name, *type, *help;
	double (*get)(const struct pt_stat *st);
};

static double target_threads(const struct pt_stat *st)
{
	return (double)st->num_threads;
}

static double target_rss(const struct pt_stat *st)
{
	return (double)st->rss_pages * (double)sysconf(_SC_PAGESIZE);
}

static double target_cpu(const struct pt_stat *st)
{
	return (double)(st->utime + st->stime) / (double)sysconf(_SC_CLK_TCK);
}

static const struct target_metric target_metrics[] = {
	{ "target_threads", "gauge", "Threads of the default target.", target_threads },
	{ "target_resident_bytes", "gauge", "Resident memory of the default target.", target_rss },
	{ "target_cpu_seconds_total", "counter", "CPU time of the default target.", target_cpu },
};

static void header(struct base_buf *b, const char *name, const char *type, const char *help)
{
	base_buf_printf(b, "# HELP podprof_%s %s\n# TYPE podprof_%s %s\n", name, help, name, type);
}

/* podprof's own process, under the names Prometheus' client libraries use
 * (process_*), so that dashboards made for any exporter show it. */
static void process_metrics(struct base_buf *b)
{
	char buf[4096];
	struct pt_stat ps;
	double boot = -1;
	long fds = 0;
	struct dirent *de;
	DIR *dir;

	if (pt_proc_slurp("/proc/self/stat", buf, sizeof(buf)) > 0 && !pt_proc_parse_stat(buf, &ps)) {
		const char *bt;

		base_buf_printf(b, "# HELP process_cpu_seconds_total Total user and system CPU time "
				"spent in seconds.\n# TYPE process_cpu_seconds_total counter\n"
				"process_cpu_seconds_total %.9g\n",
				(double)(ps.utime + ps.stime) / (double)sysconf(_SC_CLK_TCK));
		base_buf_printf(b, "# HELP process_resident_memory_bytes Resident memory size in "
				"bytes.\n# TYPE process_resident_memory_bytes gauge\n"
				"process_resident_memory_bytes %.9g\n",
				(double)ps.rss_pages * (double)sysconf(_SC_PAGESIZE));
		/* starttime is in clock ticks since boot; /proc/stat's btime is
		 * the boot in seconds since the epoch. */
		if (pt_proc_slurp("/proc/stat", buf, sizeof(buf)) > 0 && (bt = strstr(buf, "\nbtime ")))
			boot = strtod(bt + 7, NULL);
		if (boot > 0)
			base_buf_printf(b, "# HELP process_start_time_seconds Start time of the process "
					"since unix epoch in seconds.\n# TYPE process_start_time_seconds "
					"gauge\nprocess_start_time_seconds %.3f\n",
					boot + (double)ps.starttime / (double)sysconf(_SC_CLK_TCK));
	}
	if (!(dir = opendir("/proc/self/fd")))
		return;
	while ((de = readdir(dir)))
		fds += de->d_name[0] != '.';
	closedir(dir);
	/* Less the descriptor of the directory being read. */
	base_buf_printf(b, "# HELP process_open_fds Number of open file descriptors.\n"
			"# TYPE process_open_fds gauge\nprocess_open_fds %ld\n", fds > 0 ? fds - 1 : 0);
}

/* podprof_build_info{version,revision} 1: PODPROF_VERSION is
 * "VERSION (REVISION)" (see the Makefile). */
static void build_info(struct base_buf *b)
{
	const char *v = PODPROF_VERSION, *open = strstr(v, " (");
	int vlen = open ? (int)(open - v) : (int)strlen(v), rlen = 0;
	const char *rev = "unknown";

	if (open && strchr(open, ')')) {
		rev = open + 2;
		rlen = (int)(strchr(open, ')') - rev);
	} else {
		rlen = (int)strlen(rev);
	}
	header(b, "build_info", "gauge", "podprof's version and the git revision it was built from.");
	base_buf_printf(b, "podprof_build_info{version=\"%.*s\",revision=\"%.*s\"} 1\n", vlen, v, rlen,
			rev);
}

static double field(const struct pt_sampler_stats *st, size_t off)
{
	return (double)*(const uint64_t *)(const void *)((const char *)st + off);
}

static void stat_metric(struct base_buf *b, const struct stat_metric *m,
			const struct pt_sampler_stats *st)
{
	header(b, m->name, m->type, m->help);
	if (!strcmp(m->type, "summary")) {
		base_buf_printf(b, "podprof_%s{quantile=\"0.5\"} %.9g\n"
				"podprof_%s{quantile=\"0.99\"} %.9g\n"
				"podprof_%s_sum %.9g\npodprof_%s_count %.9g\n",
				m->name, field(st, m->off) / m->div, m->name, field(st, m->off99) / m->div,
				m->name, field(st, m->off_sum) / m->div, m->name, field(st, m->off_count));
		return;
	}
	base_buf_printf(b, "podprof_%s %.9g\n", m->name, field(st, m->off) / m->div);
}

void sc_metrics_handle(struct sc_server *srv, struct sc_conn *c, const struct sc_request *req,
			struct sc_params *p)
{
	struct pt_sampler_stats st;
	struct pt_stat ps;
	struct base_buf b;
	char path[64], buf[1024], *text;
	size_t len;

	(void)req;
	(void)p;
	pt_sampler_stats(sc_server_sampler(srv), &st);
	base_buf_init(&b, 1u << 20);
	for (size_t i = 0; i < SC_ARRAY_LEN(stat_metrics); i++)
		stat_metric(&b, &stat_metrics[i], &st);
	/* A target that is gone has no figures: leave them out, not 0. */
	snprintf(path, sizeof(path), "/proc/%d/stat", (int)sc_server_target(srv));
	if (pt_proc_slurp(path, buf, sizeof(buf)) > 0 && !pt_proc_parse_stat(buf, &ps))
		for (size_t i = 0; i < SC_ARRAY_LEN(target_metrics); i++) {
			const struct target_metric *m = &target_metrics[i];

			header(&b, m->name, m->type, m->help);
			base_buf_printf(&b, "podprof_%s %.9g\n", m->name, m->get(&ps));
		}
	process_metrics(&b);
	build_info(&b);
	if (base_buf_take(&b, &text, &len)) {
		sc_go_error(c, 500, "out of memory");
		return;
	}
	sc_http_respond_owned(c, 200, "Content-Type: text/plain; version=0.0.4; charset=utf-8\r\n",
			      text, len);
}
