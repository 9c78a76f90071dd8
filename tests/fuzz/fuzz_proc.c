/* libFuzzer harness: the /proc parsers on arbitrary text (the target's comm,
 * paths and everything else in /proc are under its control). The first byte
 * picks the parser. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ptrace/proc/proc.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct pt_maps *maps;
	struct pt_stat st;
	uint64_t ns, sp, pc;
	long nr;
	long long v;
	pid_t p;
	char *text;

	if (size < 1)
		return 0;
	text = malloc(size);
	if (!text)
		return 0;
	memcpy(text, data + 1, size - 1);
	text[size - 1] = '\0';
	switch (data[0] % 4) {
	case 0:
		pt_proc_parse_stat(text, &st);
		break;
	case 1:
		if (pt_proc_parse_maps(text, size - 1, &maps) == 0) {
			for (size_t i = 0; i < maps->n; i++)
				pt_maps_find(maps, maps->v[i].start);
			pt_maps_free(maps);
		}
		break;
	case 2:
		pt_proc_parse_nspid(text, &p);
		pt_proc_status_value(text, "VmRSS", &v);
		break;
	default:
		pt_proc_parse_schedstat(text, &ns, &ns, &ns);
		pt_proc_parse_loadavg(text, &ns);
		pt_proc_parse_syscall(text, &nr, &sp, &pc);
		break;
	}
	free(text);
	return 0;
}
