/* The HTTP layer's limits without a target: a server on a loop thread of
 * the test, its handler answering "ok", and raw sockets from the test
 * thread: oversized request line and headers (431), oversized bodies
 * (413), the connection cap (503), the header and idle timeouts (408, then
 * a close), and memory running out (503, the listener still serving). */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>
#include <uv.h>

#include "base/mem.h"
#include "sidecar/server/cfg.h"
#include "sidecar/server/http.h"
#include "tests/harness.h"

struct srv {
	uv_loop_t loop;
	uv_async_t stop;
	struct sc_cfg cfg;
	struct sc_http *http;
	pthread_t thread;
	int port, ready[2];
	int requests;            /* handled (loop thread) */
};

static void on_req(struct sc_conn *c, const struct sc_request *req, void *arg)
{
	struct srv *s = arg;

	static char longer[8192];   /* past the connection's own room */

	s->requests++;
	if (!strcmp(req->path, "/long")) {
		memset(longer, 'x', sizeof(longer));
		sc_http_respond(c, 200, "Content-Type: text/plain\r\n", longer, sizeof(longer));
		return;
	}
	sc_http_respond(c, 200, "Content-Type: text/plain\r\n", "ok\n", 3);
}

static void on_walk_close(uv_handle_t *h, void *arg)
{
	(void)arg;
	if (!uv_is_closing(h))
		uv_close(h, NULL);
}

static void on_stop(uv_async_t *a)
{
	struct srv *s = a->data;

	sc_http_close(s->http);
	uv_walk(&s->loop, on_walk_close, NULL);
}

static void *serve(void *arg)
{
	struct srv *s = arg;

	uv_run(&s->loop, UV_RUN_DEFAULT);
	return NULL;
}

/* A server with these flags (besides --listen 127.0.0.1:0). */
static struct srv *start(const char *const *flags, int n)
{
	static struct srv s;
	char *argv[16] = { (char *)"podprof", (char *)"--listen=127.0.0.1:0" };
	FILE *null = fopen("/dev/null", "w");

	memset(&s, 0, sizeof(s));
	for (int i = 0; i < n; i++)
		argv[2 + i] = (char *)flags[i];
	ASSERT_OK(sc_cfg_load(&s.cfg, 2 + n, argv, NULL, null, null));
	fclose(null);
	ASSERT_OK(uv_loop_init(&s.loop));
	ASSERT_OK(uv_async_init(&s.loop, &s.stop, on_stop));
	s.stop.data = &s;
	ASSERT_OK(sc_http_init(&s.loop, &s.http, &s.cfg, on_req, &s));
	s.port = sc_http_port(s.http);
	ASSERT_OK(pthread_create(&s.thread, NULL, serve, &s));
	return &s;
}

static void stop(struct srv *s)
{
	uv_async_send(&s->stop);
	pthread_join(s->thread, NULL);
	ASSERT_EQ(uv_loop_close(&s->loop), 0);   /* every handle closed */
	sc_cfg_free(&s->cfg);
}

static int connect_to(const struct srv *s)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_port = htons((uint16_t)s->port) };
	/* Every answer here comes within a second; a read that waits longer
	 * fails its test well inside the runner's 5 s (under make torture a
	 * failed allocation may leave a client unanswered: a failed
	 * assertion, not a timeout). */
	struct timeval tv = { 3, 0 };
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	ASSERT(fd >= 0);
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	ASSERT_OK(connect(fd, (struct sockaddr *)&a, sizeof(a)) ? -errno : 0);
	return fd;
}

static void send_all(int fd, const char *p, size_t n)
{
	while (n) {
		ssize_t k = send(fd, p, n, MSG_NOSIGNAL);

		if (k <= 0)
			return;   /* the server may close early: what it answered counts */
		p += k;
		n -= (size_t)k;
	}
}

/* The status of the answer read from fd (0: closed without one); the rest
 * of the answer is read into body if given. */
static int read_status(int fd, char *body, size_t len)
{
	char buf[8192];
	size_t got = 0;
	ssize_t k;
	int status = 0;

	while (got < sizeof(buf) - 1 && (k = recv(fd, buf + got, sizeof(buf) - 1 - got, 0)) > 0)
		got += (size_t)k;
	buf[got] = '\0';
	if (sscanf(buf, "HTTP/1.1 %d", &status) != 1)
		return 0;
	if (body) {
		const char *b = strstr(buf, "\r\n\r\n");

		snprintf(body, len, "%s", b ? b + 4 : "");
	}
	return status;
}

static int ask(const struct srv *s, const char *req, size_t n)
{
	int fd = connect_to(s), st;

	send_all(fd, req, n);
	st = read_status(fd, NULL, 0);
	close(fd);
	return st;
}

#define GET "GET /x HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n"

TEST(http_caps_the_request_line_and_headers)
{
	static const char *const flags[] = { "--max-header-bytes=1024" };
	struct srv *s = start(flags, 1);
	char big[4096];

	ASSERT_EQ(ask(s, GET, strlen(GET)), 200);
	/* A URL past the cap: 431, whatever else follows. */
	memset(big, 'a', sizeof(big));
	memcpy(big, "GET /", 5);
	memcpy(big + 2000, " HTTP/1.1\r\n\r\n", 13);
	ASSERT_EQ(ask(s, big, 2013), 431);
	/* Many small headers adding up past it: 431 too. */
	{
		char req[4096];
		size_t n = (size_t)snprintf(req, sizeof(req), "GET /x HTTP/1.1\r\nConnection: close\r\n");

		/* 15 counted bytes each (name and value): 1500 in all */
		for (int i = 0; i < 100; i++)
			n += (size_t)snprintf(req + n, sizeof(req) - n, "X-H%02d: 0123456789\r\n", i);
		n += (size_t)snprintf(req + n, sizeof(req) - n, "\r\n");
		ASSERT_EQ(ask(s, req, n), 431);
	}
	ASSERT_EQ(ask(s, GET, strlen(GET)), 200);   /* and it goes on */
	stop(s);
}

TEST(http_caps_the_body)
{
	static const char *const flags[] = { "--max-body-bytes=100" };
	struct srv *s = start(flags, 1);
	char req[512];
	int n;

	n = snprintf(req, sizeof(req), "POST /x HTTP/1.1\r\nContent-Length: 100\r\nConnection: close\r\n\r\n%0100d", 7);
	ASSERT_EQ(ask(s, req, (size_t)n), 200);
	/* Announced past the cap: refused before a byte of it is read. */
	n = snprintf(req, sizeof(req), "POST /x HTTP/1.1\r\nContent-Length: 101\r\n\r\n");
	ASSERT_EQ(ask(s, req, (size_t)n), 413);
	/* Chunked, past the cap as it comes. */
	n = snprintf(req, sizeof(req), "POST /x HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
		     "64\r\n%0100d\r\n64\r\n%0100d\r\n0\r\n\r\n", 1, 2);
	ASSERT_EQ(ask(s, req, (size_t)n), 413);
	stop(s);
}

TEST(http_caps_connections)
{
	static const char *const flags[] = { "--max-conns=2" };
	struct srv *s = start(flags, 1);
	int a = connect_to(s), b = connect_to(s), c = connect_to(s);
	char body[128];

	/* The third is answered 503 at once; the first two are served. */
	ASSERT_EQ(read_status(c, body, sizeof(body)), 503);
	ASSERT_STR_EQ(body, "too many connections\n");
	close(c);
	send_all(a, GET, strlen(GET));
	ASSERT_EQ(read_status(a, NULL, 0), 200);
	close(a);
	close(b);
	stop(s);
}

TEST(http_times_out_slow_headers_and_idle_connections)
{
	static const char *const flags[] = { "--header-timeout-ms=200", "--idle-timeout-ms=200" };
	struct srv *s = start(flags, 2);
	char body[128];
	int fd;

	/* Half a request, then nothing: 408 after the header timeout. */
	fd = connect_to(s);
	send_all(fd, "GET /x HTTP/1.1\r\nHo", 19);
	ASSERT_EQ(read_status(fd, body, sizeof(body)), 408);
	ASSERT_STR_EQ(body, "request header timeout\n");
	close(fd);
	/* A kept-alive connection left idle is closed, without an answer. */
	fd = connect_to(s);
	send_all(fd, "GET /x HTTP/1.1\r\nHost: h\r\n\r\n", 28);
	ASSERT_EQ(read_status(fd, NULL, 0), 200);   /* reads until the idle close */
	close(fd);
	stop(s);
}

TEST(http_answers_when_memory_runs_out)
{
	struct srv *s = start(NULL, 0);
	int fd, st;

	/* The first allocation from here on fails: the new connection's own
	 * (taken from the reserve and told 503), or its buffers' (503). */
	base_mem_fail_at(1);
	fd = connect_to(s);
	send_all(fd, GET, strlen(GET));
	st = read_status(fd, NULL, 0);
	close(fd);
	ASSERT(base_mem_failed());
	base_mem_fail_off();
	ASSERT_EQ(st, 503);
	/* The listener goes on: the next client is served, its reserve made
	 * again. */
	ASSERT_EQ(ask(s, GET, strlen(GET)), 200);
	for (int k = 2; k <= 12; k++) {
		base_mem_fail_at((uint64_t)k);
		fd = connect_to(s);
		send_all(fd, GET, strlen(GET));
		st = read_status(fd, NULL, 0);
		close(fd);
		base_mem_fail_off();
		if (st != 200 && st != 503)
			FAIL_AT("allocation %d failing: answered %d", k, st);
		ASSERT_EQ(ask(s, GET, strlen(GET)), 200);
	}
	stop(s);
}

#define GET_LONG "GET /long HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n"
/* An answer too long for the connection's own room whose sending runs out
 * of memory (its copy, its head): a 500 that says so, never a connection
 * closed without an answer (a profile made for one client, while another
 * request's failure was armed, was lost that way). */
TEST(http_answers_a_long_answer_when_memory_runs_out)
{
	struct srv *s = start(NULL, 0);
	int fd, st, errors = 0;
	char body[256];

	for (int k = 1; k <= 12; k++) {
		base_mem_fail_at((uint64_t)k);
		fd = connect_to(s);
		send_all(fd, GET_LONG, strlen(GET_LONG));
		st = read_status(fd, body, sizeof(body));
		close(fd);
		base_mem_fail_off();
		if (st != 200 && st != 503 && st != 500)
			FAIL_AT("allocation %d failing: answered %d", k, st);
		if (st == 500) {
			ASSERT_STR_EQ(body, "out of memory sending the answer\n");
			errors++;
		}
		ASSERT_EQ(ask(s, GET_LONG, strlen(GET_LONG)), 200);
	}
	ASSERT(errors > 0);   /* the answer's own allocations were among them */
	stop(s);
}
