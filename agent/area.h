/* The allocation agent's records, as it publishes them to podprof: the
 * layout is the contract between agent/ (the writer, inside the target) and
 * ptrace/allocs/agentrec.c (the reader, outside it). Types and constants only.
 *
 * The agent exports one symbol, PPA_HEADER_SYMBOL, a struct ppa_header in
 * its data. Once the agent has set itself up, header.area holds the address
 * of its record area (0 before, or when it could not map one): a struct
 * ppa_area, then max_stacks stack records of stack_size bytes each, at
 * stacks_off from the area's start. The agent fills a stack record before
 * it publishes it (nstacks grows with a release store), so a reader that
 * reads nstacks first sees whole stacks; counters change while it reads and
 * are read as they are. For the reader every field is untrusted: the target
 * writes them and may be corrupt or hostile.
 *
 * All fields are little-endian and naturally aligned (x86-64, aarch64). */
#ifndef PPA_AREA_H
#define PPA_AREA_H

#include <stdint.h>

#define PPA_HEADER_SYMBOL "podprof_alloc_header"
#define PPA_HEADER_MAGIC "PODPROFA"   /* 8 bytes, no NUL */
#define PPA_AREA_MAGIC "PPAREA01"
#define PPA_VERSION 1u

#define PPA_MAX_FRAMES 64u            /* frames kept per stack (leaf first) */
#define PPA_DEFAULT_RATE (512u * 1024u)
#define PPA_RATE_ENV "PODPROF_ALLOC_RATE"

/* ppa_area.flags */
#define PPA_F_STACKS_FULL 0x1u   /* a new stack found no room: counted in dropped_samples */
#define PPA_F_LIVE_FULL   0x2u   /* the table of live sampled blocks was full */
#define PPA_F_FORKED      0x4u   /* this process is a fork child: its records began as its parent's */
#define PPA_F_STOPPED     0x8u   /* records stopped: a fork child that found them mid-update */
#define PPA_MAX_RATE (1ull << 40)

struct ppa_header {
	char magic[8];           /* PPA_HEADER_MAGIC */
	uint32_t version;        /* PPA_VERSION */
	uint32_t header_size;    /* sizeof(struct ppa_header) */
	uint64_t area;           /* address of the struct ppa_area, 0 if none */
	uint64_t area_size;      /* bytes mapped at area */
};

struct ppa_area {
	char magic[8];           /* PPA_AREA_MAGIC */
	uint32_t version;        /* PPA_VERSION */
	uint32_t area_header_size;   /* sizeof(struct ppa_area) */
	uint64_t rate;           /* mean bytes between samples; 1: every allocation */
	uint64_t stacks_off;     /* offset of the first stack record from the area */
	uint32_t stack_size;     /* bytes per stack record */
	uint32_t max_frames;     /* frames per record (PPA_MAX_FRAMES) */
	uint64_t max_stacks;     /* records the area has room for */
	uint64_t nstacks;        /* records published (<= max_stacks) */
	uint64_t flags;          /* PPA_F_* */
	uint64_t samples;        /* allocations sampled */
	uint64_t dropped_samples;/* samples not recorded (no room for their stack, or busy) */
	uint64_t lost_frees;     /* frees of sampled blocks not recorded (busy, table full) */
	uint64_t pid;            /* the process that owns these records (getpid) */
	uint64_t start_ns;       /* CLOCK_REALTIME when the records began */
	uint64_t reserved[6];
};

/* One distinct allocation stack and its counters: as sampled, and the
 * estimates of the true ones (each sample weighed by the allocations of
 * its size it stands for, 1 / (1 - exp(-size / rate)), when it is taken
 * and again when its block is freed). */
struct ppa_stack {
	uint64_t hash;
	uint32_t nframes;        /* <= max_frames */
	uint32_t reserved;
	uint64_t alloc_objects, alloc_bytes;         /* sampled */
	uint64_t free_objects, free_bytes;
	uint64_t est_alloc_objects, est_alloc_bytes; /* estimated */
	uint64_t est_free_objects, est_free_bytes;
	uint64_t frames[];       /* max_frames return addresses, leaf first */
};

#endif
