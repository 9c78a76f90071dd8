/* podprof: serve Go's pprof endpoints for a neighbour process. The main
 * thread sets up (configuration, capabilities, the target) and then runs
 * the libuv loop: it is the loop thread, and owns the server it starts. */
#include <errno.h>
#include <linux/capability.h>
#include <signal.h>
#include <stdint.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "base/buf.h"
#include "ptrace/proc/proc.h"
#include "ptrace/sampler/backends.h"
#include "sidecar/server/cfg.h"
#include "sidecar/server/log.h"
#include "sidecar/routes.h"
#include "sidecar/server/server.h"
#include "sidecar/server/target.h"
#include "sidecar/server/util.h"

static void on_signal(uv_signal_t *h, int signum)
{
	struct sc_server **srv = h->data;

	log_info("podprof: %s received, shutting down", strsignal(signum));
	sc_server_free(*srv);
	*srv = NULL;
	uv_close((uv_handle_t *)h, NULL);
	uv_stop(h->loop);
}

/* Says at start-up, rather than at the first attach, when ptrace will be
 * refused: no CAP_SYS_PTRACE (file capabilities are ignored under
 * no_new_privs, which Kubernetes sets for allowPrivilegeEscalation: false),
 * or Yama forbids it. */
static void check_ptrace_allowed(pid_t target)
{
	char buf[4096], *cap;
	unsigned long long eff = 0;
	long long scope = -1;
	ssize_t n;

	n = pt_proc_slurp("/proc/self/status", buf, sizeof(buf));
	cap = n > 0 ? strstr(buf, "\nCapEff:") : NULL;
	if (cap)
		eff = strtoull(cap + 8, NULL, 16);
	n = pt_proc_slurp("/proc/sys/kernel/yama/ptrace_scope", buf, sizeof(buf));
	if (n > 0)
		scope = strtoll(buf, NULL, 10);
	if (scope == 3)
		log_error("ptrace: Yama ptrace_scope is 3: ptrace is disabled on this node; "
			  "profiles will fail");
	else if (!(eff & (1ull << 19 /* CAP_SYS_PTRACE */)))
		log_warn("ptrace: podprof lacks CAP_SYS_PTRACE%s; attaching to pid %d will likely "
			 "fail. Add capabilities: [SYS_PTRACE] (file capabilities need "
			 "allowPrivilegeEscalation: true)", scope >= 1 ? " and Yama restricts ptrace" : "",
			 (int)target);
}

#ifdef CAP_PERFMON
#define PODPROF_CAP_PERFMON CAP_PERFMON
#else
#define PODPROF_CAP_PERFMON 38   /* Linux 5.8 */
#endif

/* The capabilities podprof uses: CAP_SYS_PTRACE always, CAP_SYS_NICE for the
 * sampler's priority (dropped once the sampler runs), CAP_NET_BIND_SERVICE
 * for a port below 1024, CAP_PERFMON and CAP_IPC_LOCK for the perf_event
 * backend (unless --backend ptrace). CAP_SYS_ADMIN, which kernels before
 * 5.8 ask for perf events in its stead, is never kept: there, the perf
 * events sample user time only (paranoid 2) or are refused. */
static uint64_t wanted_capabilities(const struct sc_cfg *cfg)
{
	uint64_t want = 1ull << CAP_SYS_PTRACE | 1ull << CAP_SYS_NICE;
	char host[256];
	int port = 8008;

	/* perf_event: CAP_PERFMON lets it sample kernel time too and another
	 * user's process; CAP_IPC_LOCK lets the rings pass the locked-memory
	 * limit (perf_event_mlock_kb) with many threads. */
	if (sc_cfg_backend(cfg) != PT_BACKEND_PTRACE)
		want |= 1ull << PODPROF_CAP_PERFMON | 1ull << CAP_IPC_LOCK;

	if (sc_parse_hostport(cfg->listen, host, sizeof(host), &port) == 0 && port > 0 && port < 1024)
		want |= 1ull << CAP_NET_BIND_SERVICE;
	return want;
}

/* The image's binary carries cap_sys_ptrace,cap_sys_nice as permitted-only
 * file capabilities (setcap ...+p): with the effective bit, execve fails with
 * EPERM when the container's bounding set lacks one of them (a pod that adds
 * SYS_PTRACE but not SYS_NICE), whereas without it the kernel grants what the
 * bounding set allows into the permitted set and leaves the effective set
 * empty. Raise into the effective set what is permitted and wanted; a non-root
 * process started without file capabilities (or under no_new_privs) has an
 * empty permitted set and this changes nothing. Before any thread exists:
 * capabilities are per thread and threads inherit them. */
static void raise_capabilities(const struct sc_cfg *cfg)
{
	struct __user_cap_header_struct hdr = { _LINUX_CAPABILITY_VERSION_3, 0 };
	struct __user_cap_data_struct data[2];
	uint64_t prm, eff, add;

	if (syscall(SYS_capget, &hdr, data) < 0)
		return;
	prm = data[0].permitted | ((uint64_t)data[1].permitted << 32);
	eff = data[0].effective | ((uint64_t)data[1].effective << 32);
	add = prm & wanted_capabilities(cfg) & ~eff;
	if (!add)
		return;
	eff |= add;
	data[0].effective = (uint32_t)eff;
	data[1].effective = (uint32_t)(eff >> 32);
	if (syscall(SYS_capset, &hdr, data) < 0)
		log_warn("podprof: could not raise permitted capabilities: %s", sc_strerror(-errno));
}

/* Least privilege: keep CAP_SYS_PTRACE (and CAP_NET_BIND_SERVICE when
 * listening below port 1024, CAP_PERFMON and CAP_IPC_LOCK where held and
 * perf events may be used), drop every other capability from the bounding
 * set, the effective, permitted, inheritable and ambient sets. Capabilities
 * are per thread: this runs before any thread is created, and the threads
 * inherit the result. Returns the number of capabilities dropped. */
static int drop_capabilities(const struct sc_cfg *cfg)
{
	struct __user_cap_header_struct hdr = { _LINUX_CAPABILITY_VERSION_3, 0 };
	struct __user_cap_data_struct data[2];
	uint64_t keep = wanted_capabilities(cfg) & ~(1ull << CAP_SYS_NICE), eff, before;
	int dropped = 0;

	if (syscall(SYS_capget, &hdr, data) < 0)
		return 0;
	before = data[0].permitted | ((uint64_t)data[1].permitted << 32);
	eff = before & keep;
	/* The bounding set first, while CAP_SETPCAP is still effective. */
	for (int cap = 0; cap <= 63; cap++)
		if (!(keep & (1ull << cap)) && prctl(PR_CAPBSET_READ, cap, 0, 0, 0) == 1)
			prctl(PR_CAPBSET_DROP, cap, 0, 0, 0);
	prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
	data[0].effective = data[0].permitted = (uint32_t)eff;
	data[1].effective = data[1].permitted = (uint32_t)(eff >> 32);
	data[0].inheritable = data[1].inheritable = 0;
	if (syscall(SYS_capset, &hdr, data) < 0) {
		log_warn("podprof: could not drop capabilities: %s", sc_strerror(-errno));
		return 0;
	}
	for (uint64_t x = before & ~keep; x; x &= x - 1)
		dropped++;
	return dropped;
}

/* Says at start-up how CPU samples will be taken (a first look with the
 * capabilities kept: each target is decided at its first profile), and
 * refuses to start when --backend perf_event cannot be had. Returns 0 or
 * -EPERM after logging why. */
static int check_backend(const struct sc_cfg *cfg, pid_t pid)
{
	char why[320];
	int rc = pt_backend_probe(pid, sc_cfg_backend(cfg), why, sizeof(why));

	if (rc < 0) {
		log_error("backend: --backend perf_event cannot sample pid %d: %s. Grant CAP_PERFMON "
			  "(the chart's perfEvent.enabled), or use --backend auto or ptrace",
			  (int)pid, why);
		return -EPERM;
	}
	log_info("backend: %s%s: %s", cfg->backend, !strcmp(cfg->backend, "auto") ?
		 rc ? " (perf_event; ptrace for a CPython target)" : " (ptrace)" : "", why);
	return 0;
}

static void close_walk(uv_handle_t *h, void *arg)
{
	(void)arg;
	if (!uv_is_closing(h))
		uv_close(h, NULL);
}

/* Two descriptors per target thread (stat, schedstat), a third for its
 * perf event (unless --backend ptrace), and one per client: the usual soft
 * limit of 1024 is too few for a big target. The hard limit is ours to
 * take; say so when even that is short. */
static void raise_fd_limit(const struct sc_cfg *cfg)
{
	struct rlimit rl;
	rlim_t per = sc_cfg_backend(cfg) == PT_BACKEND_PTRACE ? 2 : 3;
	rlim_t want = (rlim_t)cfg->max_threads * per + (rlim_t)cfg->max_conns + 64;

	if (getrlimit(RLIMIT_NOFILE, &rl))
		return;
	if (rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
		getrlimit(RLIMIT_NOFILE, &rl);
	}
	if (rl.rlim_cur < want)
		log_info("podprof: open-file limit %llu: room for about %llu target threads "
			 "(threads past it go unsampled)", (unsigned long long)rl.rlim_cur,
			 (unsigned long long)(rl.rlim_cur > (rlim_t)cfg->max_conns + 64 ?
					      (rl.rlim_cur - (rlim_t)cfg->max_conns - 64) / per : 0));
}

/* The process to profile (--pid, --comm, --exe or the only candidate).
 * Returns 0, or a negative errno after logging why. */
static int select_target(const struct sc_cfg *cfg, pid_t *pid)
{
	struct base_buf msg;
	int rc;

	base_buf_init(&msg, 65536);
	rc = sc_target_select(cfg, "/proc", pid, &msg);
	if (rc)
		log_error("target: %s", msg.data ? msg.data : sc_strerror(rc));
	base_buf_free(&msg);
	return rc;
}

int main(int argc, char **argv)
{
	struct sc_server *srv = NULL;
	const struct sc_route *routes;
	size_t nroutes;
	uv_signal_t sigint, sigterm;
	struct sc_cfg cfg;
	sigset_t set;
	uv_loop_t *loop;
	pid_t pid;
	int rc, sampler_nice;

	rc = sc_cfg_load(&cfg, argc, argv, sc_routes_help, stdout, stderr);
	if (rc) {
		sc_cfg_free(&cfg);
		return rc > 0 ? 0 : 2;
	}
	sc_log_init();
	sc_log_json = !strcmp(cfg.log_format, "json");
	sc_log_level = sc_log_parse_level(cfg.log_level);

	/* The sampler reads SIGCHLD through a signalfd: block it in every
	 * thread, which inherit this mask. */
	sigemptyset(&set);
	sigaddset(&set, SIGCHLD);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	signal(SIGPIPE, SIG_IGN);

	raise_capabilities(&cfg);
	if (select_target(&cfg, &pid)) {
		sc_cfg_free(&cfg);
		return 1;
	}

	check_ptrace_allowed(pid);   /* the first line podprof logs when it runs */
	raise_fd_limit(&cfg);
	/* The sampler thread, created by sc_server_new, inherits this thread's
	 * nice value; set it while CAP_SYS_NICE may still be held and take it
	 * back once the sampler runs. A thread stopped between ticks waits for
	 * the sampler to wake and get a core: among more runnable target threads
	 * than cores, at nice 0 that wait is a scheduler tick or more (median
	 * 7-9 ms with 64 busy threads on 2 cores; 28 us at nice -10, with the
	 * short slices the sampler then asks for: see short_slice). Its CPU is
	 * bounded by the rate it lowers (see adapt_rate), whatever its priority. */
	sampler_nice = setpriority(PRIO_PROCESS, 0, cfg.sampler_nice) ? 0 : cfg.sampler_nice;
	rc = drop_capabilities(&cfg);
	if (rc)
		log_info("podprof: kept only the capabilities it needs (CAP_SYS_PTRACE%s), dropped %d",
			 sc_cfg_backend(&cfg) != PT_BACKEND_PTRACE ? ", and CAP_PERFMON and CAP_IPC_LOCK "
			 "where granted" : "", rc);
	if (check_backend(&cfg, pid)) {
		sc_cfg_free(&cfg);
		return 1;
	}
	loop = uv_default_loop();
	routes = sc_routes(&nroutes);
	rc = sc_server_new(&srv, loop, &cfg, pid, routes, nroutes);
	setpriority(PRIO_PROCESS, 0, 0);   /* this thread serves HTTP: no favour */
	if (rc) {
		log_error("podprof: cannot start: %s", sc_strerror(rc));
		sc_cfg_free(&cfg);
		return 1;
	}
	if (sampler_nice != cfg.sampler_nice)
		log_info("podprof: the sampler runs at nice 0, not %d (that needs CAP_SYS_NICE): "
			 "with more runnable target threads than cores, a thread stopped between "
			 "ticks waits longer for it", cfg.sampler_nice);
	log_info("podprof %s: profiling pid %d; serving http://%s/debug/pprof/ (port %d)",
		 PODPROF_VERSION, (int)pid, cfg.listen, sc_server_port(srv));
	if (strncmp(cfg.listen, "127.", 4) && strncmp(cfg.listen, "localhost:", 10) &&
	    strncmp(cfg.listen, "[::1]:", 6))
		log_warn("http: listening on %s, beyond loopback: anyone who reaches this port can "
			 "profile the target", cfg.listen);

	uv_signal_init(loop, &sigint);
	uv_signal_init(loop, &sigterm);
	sigint.data = sigterm.data = &srv;
	uv_signal_start(&sigint, on_signal, SIGINT);
	uv_signal_start(&sigterm, on_signal, SIGTERM);
	uv_run(loop, UV_RUN_DEFAULT);

	if (srv)
		sc_server_free(srv);
	uv_walk(loop, close_walk, NULL);
	uv_run(loop, UV_RUN_DEFAULT);
	rc = uv_loop_close(loop);
	if (rc)
		log_warn("podprof: loop closed with handles open: %s", uv_strerror(rc));
	sc_cfg_free(&cfg);
	return 0;
}
