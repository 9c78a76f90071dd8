/* libFuzzer harness: the whole HTTP request path, as a client drives it.
 * Each input is written to a real connection of a real server (libuv, llhttp,
 * our limits, the router, every handler, the sampler thread attached to a
 * sleeping child of ours), then the client half-closes and reads until the
 * server closes. The first byte picks the server: with or without a bearer
 * token, so both sides of the auth check are explored.
 *
 * A profile request is cut short by the half-close (its session is
 * cancelled), so no input can hold the fuzzer for its `seconds`. */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <uv.h>

#include "sidecar/server/cfg.h"
#include "sidecar/server/log.h"
#include "sidecar/routes.h"
#include "sidecar/server/server.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static uv_loop_t loop;
static struct sc_cfg cfgs[2];
static struct sc_server *servers[2];
static pid_t child;

struct client {
	uv_poll_t poll;
	int fd;
	int done;
};

static void kill_child(void)
{
	if (child > 0) {
		kill(child, SIGKILL);
		waitpid(child, NULL, 0);
	}
}

static void start_server(int i, const char *token_file)
{
	char pid[32], *argv[8];
	size_t nroutes;
	const struct sc_route *routes = sc_routes(&nroutes);
	int argc = 0;

	snprintf(pid, sizeof(pid), "--pid=%d", (int)child);
	argv[argc++] = (char *)"podprof";
	argv[argc++] = pid;
	argv[argc++] = (char *)"--listen=127.0.0.1:0";
	argv[argc++] = (char *)"--max-seconds=5";
	argv[argc++] = (char *)"--detach-grace-ms=0";
	if (token_file)
		argv[argc++] = (char *)token_file;
	argv[argc] = NULL;
	if (sc_cfg_load(&cfgs[i], argc, argv, NULL, stdout, stderr) ||
	    sc_server_new(&servers[i], &loop, &cfgs[i], child, routes, nroutes)) {
		fprintf(stderr, "fuzz-http: cannot start server %d\n", i);
		exit(1);
	}
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	static char token_arg[64];
	char path[] = "/tmp/podprof-fuzz-token-XXXXXX";
	int fd;

	(void)argc;
	(void)argv;
	signal(SIGPIPE, SIG_IGN);
	sc_log_level = SC_LOG_ERROR + 1;   /* quiet: bad requests are the point */
	child = fork();
	if (child == 0) {
		for (;;)
			pause();
	}
	atexit(kill_child);
	fd = mkstemp(path);
	if (fd < 0 || write(fd, "fuzz-token\n", 11) != 11) {
		perror("fuzz-http: token file");
		exit(1);
	}
	close(fd);
	snprintf(token_arg, sizeof(token_arg), "--auth-token-file=%s", path);
	uv_loop_init(&loop);
	start_server(0, NULL);
	start_server(1, token_arg);
	unlink(path);
	return 0;
}

static void on_closed(uv_handle_t *h)
{
	struct client *cl = h->data;

	close(cl->fd);
	cl->done = 2;
}

static void on_readable(uv_poll_t *p, int status, int events)
{
	struct client *cl = p->data;
	char buf[65536];
	ssize_t n;

	(void)events;
	do
		n = read(cl->fd, buf, sizeof(buf));
	while (n > 0);
	if (status < 0 || n == 0 || (n < 0 && errno != EAGAIN)) {
		uv_poll_stop(p);
		cl->done = 1;
		uv_close((uv_handle_t *)p, on_closed);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	struct client cl = { 0 };
	size_t off = 0;
	int which;

	if (size < 1 || size > 200000)
		return 0;
	which = data[0] & 1;
	data++;
	size--;
	sa.sin_port = htons((uint16_t)sc_server_port(servers[which]));
	cl.fd = socket(AF_INET, SOCK_STREAM, 0);
	if (cl.fd < 0 || connect(cl.fd, (struct sockaddr *)&sa, sizeof(sa))) {
		perror("fuzz-http: connect");
		abort();
	}
	fcntl(cl.fd, F_SETFL, O_NONBLOCK);
	uv_poll_init(&loop, &cl.poll, cl.fd);
	cl.poll.data = &cl;
	uv_poll_start(&cl.poll, UV_READABLE | UV_DISCONNECT, on_readable);
	/* Write what the socket takes, letting the server read in between. */
	while (off < size && !cl.done) {
		ssize_t n = write(cl.fd, data + off, size - off);

		if (n > 0)
			off += (size_t)n;
		else if (n < 0 && errno != EAGAIN)
			break;
		uv_run(&loop, UV_RUN_NOWAIT);
	}
	if (!cl.done)
		shutdown(cl.fd, SHUT_WR);
	while (cl.done != 2)
		uv_run(&loop, UV_RUN_ONCE);
	return 0;
}
