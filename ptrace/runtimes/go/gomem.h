/* A Go program's own allocation records: the runtime's memory-profile
 * buckets (runtime/mprof.go), read from outside the way runtime.MemProfile
 * reads them, into neutral records (ptrace/core/allocs.h). Go 1.18 to 1.26 share
 * the bucket layout, 1.27 keeps counts only (counts_only); the cycle state
 * is runtime.mProf (1.18) or runtime.mProfCycle (1.19 on). Every byte read
 * is untrusted. Any thread. */
#ifndef PT_GOMEM_H
#define PT_GOMEM_H

#include <stdint.h>

#include "ptrace/core/allocs.h"

/* The runtime addresses of the runtime's symbols, 0 where absent; looked up
 * by the caller in the executable's symbol table, by the names
 * pt_gomem_symbol_names gives in this order. */
struct pt_gomem_syms {
	uint64_t mbuckets;        /* runtime.mbuckets */
	uint64_t mprofcycle;      /* runtime.mProfCycle (1.19 on) */
	uint64_t mprof;           /* runtime.mProf (1.18) */
	uint64_t memprofilerate;  /* runtime.MemProfileRate */
	uint64_t disable;         /* runtime.disableMemoryProfiling */
	/* Go 1.27 on: a cycle's record holds counts only (allocs, frees); its
	 * bytes are the counts times the bucket's object size. */
	int counts_only;
	/* The rate is not known (a stripped binary: no runtime.MemProfileRate
	 * to read): Go's default, 512 KiB, is assumed. */
	int rate_assumed;
};
#define PT_GOMEM_NSYMS 5
extern const char *const pt_gomem_symbol_names[PT_GOMEM_NSYMS];

#define PT_GOMEM_MAX_BUCKETS 1000000   /* buckets walked at most (the list is the target's) */
#define PT_GOMEM_MAX_STACK 1024        /* frames per bucket (GODEBUG profstackdepth's max) */

/* Reads the memory-profile buckets through rd into out (source "go", rate
 * MemProfileRate), as runtime.MemProfile would report them now: per bucket
 * active plus the cycle's pending future counts (all futures before the
 * first GC). Buckets of other types are skipped. Returns 0; -ENOENT when
 * the program keeps no records (*why says why, a static string: symbols
 * missing, the linker disabled memory profiling, MemProfileRate 0);
 * -EPROTO for records that make no sense (*why says which); -EFAULT or
 * another negative errno from rd; -ENOMEM. */
int pt_gomem_read(pt_allocs_read_fn rd, void *arg, const struct pt_gomem_syms *syms,
		  struct pt_allocs *out, const char **why);

#endif
