/* Symbol lookup (pprof's symbolz): names of addresses, from the target's
 * current maps. Needs no attach. The names it returns belong to the
 * request (the caller frees them, and the array). Sampler thread only, as
 * every session hook. */
#include "ptrace/sessions/symbols.h"

#include <errno.h>
#include <string.h>

#include "base/mem.h"
#include "ptrace/space/gopclntab.h"
#include "ptrace/sampler/sampler.h"
#include "ptrace/sampler/session.h"
#include "ptrace/mechanism/tracee.h"
#include "ptrace/space/space.h"

static int symbols_start(struct pt_session *ss)
{
	struct pt_request *req = ss->req;

	pt_space_refresh_maps(pt_tracee_space(ss->t));
	req->names = base_calloc(req->naddrs ? req->naddrs : 1, sizeof(char *));
	if (!req->names)
		return -ENOMEM;
	for (size_t i = 0; i < req->naddrs; i++) {
		struct pt_goline gl[PT_GOTAB_MAX_INLINE + 1];
		const struct pt_module *mod;
		const char *name;

		pt_space_name(pt_tracee_space(ss->t), req->addrs[i], &name, &mod);
		/* Go's symbolz (runtime.FuncForPC) names inlined code by the
		 * innermost function. */
		if (name && pt_space_go_lines(pt_tracee_space(ss->t), req->addrs[i], gl, PT_GOTAB_MAX_INLINE + 1) > 0)
			name = gl[0].name;
		if (name && !(req->names[i] = base_strdup(name)))
			goto nomem;
	}
	return 0;
nomem:
	/* Out of memory: no names at all rather than some silently missing. */
	for (size_t i = 0; i < req->naddrs; i++)
		base_free(req->names[i]);
	base_free(req->names);
	req->names = NULL;
	return -ENOMEM;
}

static int symbols_finish(struct pt_session *ss)
{
	(void)ss;
	return 0;
}

const struct pt_session_kind pt_kind_symbols = {
	.name = "symbol",
	.size = sizeof(struct pt_session),
	.start = symbols_start,
	.finish = symbols_finish,
};
