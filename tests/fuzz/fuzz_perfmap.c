/* libFuzzer harness: the perf-map parser (a file the target writes) and
 * lookups at addresses drawn from the input and around every entry. */
#include <stdint.h>
#include <string.h>

#include "ptrace/space/perfmap.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct pt_perfmap *pm;
	uint64_t probe = 0;

	if (pt_perfmap_parse((const char *)data, size, &pm, NULL))
		return 0;
	memcpy(&probe, data, size < sizeof(probe) ? size : sizeof(probe));
	const char *name = pt_perfmap_lookup(pm, probe);

	if (name && strlen(name) > PT_PERFMAP_MAX_NAME)
		__builtin_trap();
	for (uint64_t a = 0; a < 0x10000; a += 0x1000)
		pt_perfmap_lookup(pm, a);
	pt_perfmap_lookup(pm, UINT64_MAX);
	pt_perfmap_free(pm);
	return 0;
}
