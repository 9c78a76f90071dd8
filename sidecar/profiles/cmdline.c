/* /debug/pprof/cmdline: the target's command line as Go's Cmdline, read
 * from /proc and answered at once. Loop thread. */
#include "sidecar/profiles/cmdline.h"

#include <errno.h>
#include <stdio.h>

#include "ptrace/proc/proc.h"
#include "sidecar/server/http.h"
#include "sidecar/server/params.h"
#include "sidecar/server/reply.h"
#include "sidecar/server/server.h"
#include "sidecar/server/util.h"

void sc_profile_cmdline(struct sc_server *srv, struct sc_conn *c, const struct sc_request *req,
			struct sc_params *p)
{
	char path[64], *text;
	size_t len;
	int err;

	(void)srv;
	(void)req;
	/* Small (a megabyte at most): read on the loop, no job. */
	snprintf(path, sizeof(path), "/proc/%d/cmdline", (int)p->target.pid);
	err = pt_proc_slurp_alloc(path, 1u << 20, &text, &len);
	if (err) {
		sc_go_error(c, err == -ESRCH ? 404 : 500,
			    err == -ESRCH ? "target process is gone" : sc_strerror(err));
		return;
	}
	/* /proc ends each argument with NUL; Go joins with NUL, nothing after. */
	if (len && text[len - 1] == '\0')
		len--;
	sc_http_respond_owned(c, 200, SC_TEXT_PLAIN, text, len);
}
