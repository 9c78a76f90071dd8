/* make bench's flame graph page: N random distinct stacks (8 to 30 frames
 * from a pool of 5000 function names, two sample types) through
 * encoder/flame.c's page writer. Writes the page to OUT and prints
 * "stacks N bytes B encode_ms T".
 *   bench-flamegen N OUT */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "base/mem.h"
#include "encoder/flame.h"

int main(int argc, char **argv)
{
	size_t n = argc > 2 ? strtoul(argv[1], NULL, 10) : 0, nf = 0, len;
	static char pool[5000][24];
	static const char *names[5000];
	struct enc_flame_stack *stacks;
	struct timespec a, b;
	uint32_t *frames;
	int64_t *values;
	char *out;
	FILE *fh;

	if (!n || argc != 3) {
		fprintf(stderr, "usage: bench-flamegen N OUT\n");
		return 2;
	}
	srand(42);
	for (int i = 0; i < 5000; i++) {
		snprintf(pool[i], sizeof(pool[i]), "module::function_%d", i);
		names[i] = pool[i];
	}
	stacks = calloc(n, sizeof(*stacks));
	frames = calloc(n * 30, sizeof(*frames));
	values = calloc(n * 2, sizeof(*values));
	if (!stacks || !frames || !values)
		return 1;
	for (size_t i = 0; i < n; i++) {
		uint32_t depth = 8 + (uint32_t)(rand() % 23);

		stacks[i] = (struct enc_flame_stack){ (uint32_t)nf, depth };
		/* a few common roots, then random callees: shared prefixes as in
		 * real programs, every stack distinct */
		frames[nf++] = (uint32_t)(rand() % 4);
		frames[nf++] = 4 + (uint32_t)(rand() % 40);
		for (uint32_t d = 2; d < depth; d++)
			frames[nf++] = (uint32_t)(rand() % 5000);
		values[2 * i] = 1 + rand() % 10;
		values[2 * i + 1] = values[2 * i] * 10000000;
	}
	{
		static const struct enc_flame_type types[] = { { "samples", "count" }, { "cpu", "nanoseconds" } };
		struct enc_flame f = { .title = "profile of bench-flamegen", .types = types, .ntypes = 2,
				       .dflt = 1, .names = names, .nnames = 5000, .frames = frames,
				       .stacks = stacks, .nstacks = n, .values = values };

		clock_gettime(CLOCK_MONOTONIC, &a);
		if (enc_flame_html(&f, 1u << 30, &out, &len))
			return 1;
		clock_gettime(CLOCK_MONOTONIC, &b);
	}
	if (!(fh = fopen(argv[2], "w")) || fwrite(out, 1, len, fh) != len || fclose(fh))
		return 1;
	printf("stacks %zu bytes %zu encode_ms %.1f\n", n, len,
	       (double)(b.tv_sec - a.tv_sec) * 1e3 + (double)(b.tv_nsec - a.tv_nsec) / 1e6);
	base_free(out);
	free(stacks);
	free(frames);
	free(values);
	return 0;
}
