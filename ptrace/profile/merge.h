/* One profile of several processes' profiles (a group's answer). Sampler
 * thread, though it touches nothing but its arguments. */
#ifndef PT_MERGE_H
#define PT_MERGE_H

#include <stddef.h>

#include "ptrace/profile/profile.h"

#define PT_MERGE_MAX 256

/* One profile of several processes' (a group's members'): parts[i] is
 * procs[i]'s, or NULL where that process gave none (procs[i].err says
 * why). Maps, locations and samples are each part's, every sample marked
 * with its process (`proc`); a trace's timelines are merged in time order,
 * each part's shifted by when it began after the first; counts and the CPU
 * accounting are summed; the window is the first part's start to the last
 * part's end. Memory with allocation stacks from some processes and by
 * mapping from others keeps the stacks, the others named (left_out). At
 * most PT_MERGE_MAX parts. Takes what the parts hold: each part is
 * freed, and set to NULL, whatever the result. Returns 0, -E2BIG or
 * -ENOMEM (*out NULL). */
int pt_profile_merge(struct pt_profile **parts, const struct pt_profile_proc *procs, size_t n,
		     struct pt_profile **out);

#endif
