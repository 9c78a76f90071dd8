/* What podprof reads from an object file, kept once for every module that
 * maps the same file in any traced process: its symbol table and its Go
 * table (.gopclntab, and the image it points into). Found by the file's
 * GNU build-id, or, for a file without one, by the file itself (device,
 * inode and path as the maps name them). 64 workers of one server cost one
 * copy of each library's symbols. Sampler thread only. */
#ifndef PT_OBJECTS_H
#define PT_OBJECTS_H

#include <stddef.h>

#include "ptrace/space/elf.h"

struct pt_gotab;

struct pt_object {
	char *key;              /* NULL: one module's own, never shared */
	int refs;
	/* symbols: 0 not loaded, 1 loaded, -1 none found (a later module
	 * tries again: its process may see what this one's did not) */
	int sym_state;
	const char *sym_source; /* "file", "debug", "memory", "vdso" */
	struct pt_symtab syms;
	/* Go: 0 not looked for, 1 found (go), -1 the file has none */
	int go_state;
	struct pt_gotab *go;
	const char *go_source;  /* "section", "scan" (magic in the file), "memory" */
	void *go_img;           /* the image go points into: a file mapping or a copy */
	size_t go_img_len;
	int go_img_mapped;
	/* Names looked up in the file (pt_module_lookup: CPython's globals,
	 * the agent's and Go's records): ELF vaddr and size, if found. */
	struct pt_object_name {
		char *name;
		uint64_t vaddr, size;
		int found;
	} *names;
	size_t nnames, names_cap;
	struct pt_object *next;
};

struct pt_objects;

int pt_objects_new(struct pt_objects **out);
/* Frees the table; every object must have been put back. NULL-safe. */
void pt_objects_free(struct pt_objects *objs);
/* The object under key, found or made, with one more reference; key NULL
 * (or objs NULL): a new object of the caller's alone. NULL on -ENOMEM. */
struct pt_object *pt_object_get(struct pt_objects *objs, const char *key);
/* Drops a reference; the last one frees the object and what it holds. */
void pt_object_put(struct pt_objects *objs, struct pt_object *obj);
/* The looked-up name's entry, or NULL if it was never looked up. */
const struct pt_object_name *pt_object_name(const struct pt_object *obj, const char *name);
/* Remembers what looking name up found. Returns 0 or -ENOMEM (forgotten:
 * looked up again next time). */
int pt_object_name_add(struct pt_object *obj, const char *name, int found, uint64_t vaddr,
		       uint64_t size);
/* Objects held, and how many of them more than one module uses. */
void pt_objects_count(const struct pt_objects *objs, size_t *n, size_t *shared);

#endif
