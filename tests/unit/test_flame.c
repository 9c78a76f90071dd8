/* encoder/flame.c: folded stacks, speedscope's file and the page's data,
 * from a small description with known sums. */
#include <stdlib.h>
#include <string.h>

#include "base/mem.h"
#include "encoder/flame.h"
#include "encoder/pprof.h"
#include "tests/harness.h"

/* main;a;x 3/30, main;a;x 1/10 again (summed), main;b 2/0, main (self) 4/40;
 * a name holding ';' and a line break. */
static const char *const names[] = { "main", "a", "x;y", "b\nc" };
static const uint32_t frames[] = { 0, 1, 2, 0, 1, 2, 0, 3, 0 };
static const struct enc_flame_stack stacks[] = { { 0, 3 }, { 3, 3 }, { 6, 2 }, { 8, 1 } };
static const int64_t values[] = { 3, 30, 1, 10, 2, 0, 4, 40 };
static const struct enc_flame_type types[] = { { "samples", "count" }, { "cpu", "nanoseconds" } };

static struct enc_flame sample(void)
{
	return (struct enc_flame){ .title = "profile of <test>", .types = types, .ntypes = 2, .dflt = 1,
				   .names = names, .nnames = 4, .frames = frames, .stacks = stacks,
				   .nstacks = 4, .values = values };
}

TEST(flame_collapsed_sums_identical_stacks_root_first)
{
	struct enc_flame f = sample();
	char *out;
	size_t len;

	ASSERT_OK(enc_flame_collapsed(&f, 0, 1 << 20, &out, &len));
	ASSERT_STR_EQ(out, "main 4\nmain;a;x:y 4\nmain;b c 2\n");
	base_free(out);
	/* cpu: b's 0 is no line */
	ASSERT_OK(enc_flame_collapsed(&f, 1, 1 << 20, &out, &len));
	ASSERT_STR_EQ(out, "main 40\nmain;a;x:y 40\n");
	base_free(out);
	ASSERT_EQ(enc_flame_collapsed(&f, 2, 1 << 20, &out, &len), -EINVAL);
	ASSERT_EQ(enc_flame_collapsed(&f, 0, 8, &out, &len), -E2BIG);
}

TEST(flame_speedscope_one_profile_per_type)
{
	struct enc_flame f = sample();
	char *out;
	size_t len;

	ASSERT_OK(enc_flame_speedscope(&f, "podprof@test", 1 << 20, &out, &len));
	ASSERT(strstr(out, "\"$schema\":\"https://www.speedscope.app/file-format-schema.json\""));
	ASSERT(strstr(out, "\"activeProfileIndex\":1"));
	ASSERT(strstr(out, "{\"name\":\"x;y\"},{\"name\":\"b\\u000ac\"}"));
	/* samples: counts 3 1 2 4 (end 10); cpu 30 10 40, b's 0 left out (end 80) */
	ASSERT(strstr(out, "\"unit\":\"none\",\"startValue\":0,\"samples\":[[0,1,2],[0,1,2],[0,3],[0]],"
			   "\"weights\":[3,1,2,4],\"endValue\":10}"));
	ASSERT(strstr(out, "\"unit\":\"nanoseconds\",\"startValue\":0,\"samples\":[[0,1,2],[0,1,2],[0]],"
			   "\"weights\":[30,10,40],\"endValue\":80}"));
	ASSERT(strstr(out, "profile of \\u003ctest\\u003e"));   /* no '<' into a page */
	base_free(out);
}

TEST(flame_page_holds_the_tree_and_prunes_the_invisible)
{
	static uint32_t many_frames[2 * 200002];
	static struct enc_flame_stack many[200001];
	static int64_t many_values[2 * 200001];
	struct enc_flame f = sample();
	char *out, *data;
	size_t len;

	ASSERT_OK(enc_flame_html(&f, 1 << 22, &out, &len));
	ASSERT(strstr(out, "<!DOCTYPE html>") == out);
	data = strstr(out, "<script id=\"data\" type=\"application/json\">");
	ASSERT(data);
	/* root, main, a, x;y, b: parent, name, samples, cpu each */
	ASSERT(strstr(data, "\"pruned\":0,"));
	ASSERT(strstr(data, "\"nodes\":[-1,-1,10,80,0,0,10,80,1,1,4,40,2,2,4,40,1,3,2,0]"));
	ASSERT(!strstr(out, "/*PODPROF-DATA*/"));
	base_free(out);
	/* one heavy stack and 200000 light ones (each 1 in 200001 of the
	 * total, under ENC_FLAME_MIN_SHARE): the light are left out, said */
	for (uint32_t i = 0; i < 200001; i++) {
		many[i] = (struct enc_flame_stack){ 2 * i, 2 };
		many_frames[2 * i] = 0;
		many_frames[2 * i + 1] = i;
		many_values[2 * i] = i ? 1 : 4000000;
		many_values[2 * i + 1] = i ? 1 : 4000000;
	}
	{
		const char **nm = base_calloc(200001, sizeof(*nm));

		ASSERT(nm);
		for (uint32_t i = 0; i < 200001; i++)
			nm[i] = i ? "light" : "heavy";
		f.names = nm;
		f.nnames = 200001;
		f.frames = many_frames;
		f.stacks = many;
		f.nstacks = 200001;
		f.values = many_values;
		ASSERT_OK(enc_flame_html(&f, 1 << 26, &out, &len));
		ASSERT(strstr(out, "\"pruned\":200000,"));
		base_free(out);
		base_free(nm);
	}
}

TEST(flame_page_of_a_change_draws_growth_only)
{
	/* main;a grew by 5, main;b fell by 5: the root's net is 0 */
	static const uint32_t fr[] = { 0, 1, 0, 3 };
	static const struct enc_flame_stack st[] = { { 0, 2 }, { 2, 2 } };
	static const int64_t v[] = { 5, -5 };
	static const struct enc_flame_type ty[] = { { "goroutine", "count" } };
	struct enc_flame f = { .title = "goroutine", .types = ty, .ntypes = 1, .names = names, .nnames = 4,
			       .frames = fr, .stacks = st, .nstacks = 2, .values = v };
	char *out;
	size_t len;

	ASSERT_OK(enc_flame_html(&f, 1 << 22, &out, &len));
	/* root 5, main 5, a 5 (a net of 0 would have pruned them all); b
	 * grew by nothing: left out; the fall said */
	ASSERT(strstr(out, "\"pruned\":1,\"fell\":1,"));
	ASSERT(strstr(out, "\"nodes\":[-1,-1,5,0,0,5,1,1,5]"));
	base_free(out);
	/* folded stacks keep what each stack is: the fall is no line */
	ASSERT_OK(enc_flame_collapsed(&f, 0, 1 << 20, &out, &len));
	ASSERT_STR_EQ(out, "main;a 5\n");
	base_free(out);
}

TEST(flame_of_a_pprof_builder_merges_names_and_roots_processes)
{
	struct enc_pprof *p;
	struct enc_pprof_flame x;
	int64_t m, f1, f2, l1, l2, v = 7;
	uint64_t ids[2];
	struct enc_label lab[2] = { { .key = "pid", .num = 42 }, { .key = "process", .str = "app" } };

	ASSERT_OK(enc_pprof_new(&p));
	ASSERT(enc_pprof_sample_type(p, "samples", "count") >= 0);
	ASSERT((m = enc_pprof_mapping(p, 0x1000, 0x2000, 0, "/app", "", 1)) > 0);
	/* two functions named <module>, in two files */
	ASSERT((f1 = enc_pprof_function_src(p, "<module>", "a.py", 1, 0)) > 0);
	ASSERT((f2 = enc_pprof_function_src(p, "<module>", "b.py", 1, 0)) > 0);
	ASSERT(f1 != f2);
	ASSERT((l1 = enc_pprof_location(p, (uint64_t)m, 0x1010, (uint64_t)f1)) > 0);
	ASSERT((l2 = enc_pprof_location(p, (uint64_t)m, 0x1020, (uint64_t)f2)) > 0);
	ids[0] = (uint64_t)l1;
	ASSERT_OK(enc_pprof_sample_labels(p, ids, 1, &v, 1, lab, 2));
	ids[0] = (uint64_t)l2;
	ASSERT_OK(enc_pprof_sample_labels(p, ids, 1, &v, 1, lab, 2));
	ASSERT_OK(enc_pprof_flame(p, "t", &x));
	ASSERT_EQ(x.f.nnames, 2);   /* <module> once, and "app (pid 42)" */
	ASSERT_STR_EQ(x.f.names[x.f.frames[0]], "app (pid 42)");
	ASSERT_STR_EQ(x.f.names[x.f.frames[1]], "<module>");
	{
		char *out;
		size_t len;

		ASSERT_OK(enc_flame_collapsed(&x.f, 0, 1 << 20, &out, &len));
		ASSERT_STR_EQ(out, "app (pid 42);<module> 14\n");
		base_free(out);
	}
	enc_pprof_flame_free(&x);
	enc_pprof_free(p);
}
