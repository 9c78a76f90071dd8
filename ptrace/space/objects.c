/* Object files' symbols and Go tables shared by key (see objects.h): a
 * list, as a pod's processes map some hundreds of files at most and an
 * object is looked up only when a module is first seen. Sampler thread
 * only. */
#include "ptrace/space/objects.h"

#include <errno.h>
#include <string.h>
#include <sys/mman.h>

#include "base/array.h"
#include "base/mem.h"
#include "ptrace/space/gopclntab.h"

struct pt_objects {
	struct pt_object *head;
	size_t n;
};

int pt_objects_new(struct pt_objects **out)
{
	*out = base_calloc(1, sizeof(**out));
	return *out ? 0 : -ENOMEM;
}

void pt_objects_free(struct pt_objects *objs)
{
	base_free(objs);
}

struct pt_object *pt_object_get(struct pt_objects *objs, const char *key)
{
	struct pt_object *o;

	if (objs && key)
		for (o = objs->head; o; o = o->next)
			if (!strcmp(o->key, key)) {
				o->refs++;
				return o;
			}
	o = base_calloc(1, sizeof(*o));
	if (!o)
		return NULL;
	o->refs = 1;
	if (objs && key) {
		if (!(o->key = base_strdup(key))) {
			base_free(o);
			return NULL;
		}
		o->next = objs->head;
		objs->head = o;
		objs->n++;
	}
	return o;
}

void pt_object_put(struct pt_objects *objs, struct pt_object *obj)
{
	if (!obj || --obj->refs > 0)
		return;
	if (obj->key)
		for (struct pt_object **pp = &objs->head; *pp; pp = &(*pp)->next)
			if (*pp == obj) {
				*pp = obj->next;
				objs->n--;
				break;
			}
	pt_symtab_free(&obj->syms);
	pt_gotab_free(obj->go);
	if (obj->go_img_mapped)
		munmap(obj->go_img, obj->go_img_len);
	else
		base_free(obj->go_img);
	for (size_t i = 0; i < obj->nnames; i++)
		base_free(obj->names[i].name);
	base_free(obj->names);
	base_free(obj->key);
	base_free(obj);
}

const struct pt_object_name *pt_object_name(const struct pt_object *obj, const char *name)
{
	for (size_t i = 0; i < obj->nnames; i++)
		if (!strcmp(obj->names[i].name, name))
			return &obj->names[i];
	return NULL;
}

int pt_object_name_add(struct pt_object *obj, const char *name, int found, uint64_t vaddr,
		       uint64_t size)
{
	char *copy;

	if (BASE_ARRAY_RESERVE(obj->names, obj->names_cap, obj->nnames + 1) ||
	    !(copy = base_strdup(name)))
		return -ENOMEM;
	obj->names[obj->nnames++] = (struct pt_object_name){ copy, vaddr, size, found };
	return 0;
}

void pt_objects_count(const struct pt_objects *objs, size_t *n, size_t *shared)
{
	*n = *shared = 0;
	for (const struct pt_object *o = objs ? objs->head : NULL; o; o = o->next) {
		++*n;
		*shared += o->refs > 1;
	}
}
