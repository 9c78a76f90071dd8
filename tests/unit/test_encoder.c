/* pprof encoder round trip: gunzip, protobuf-c unpack, and the invariants
 * that go tool pprof, Parca and Alloy check. */
#include <errno.h>
#include <zlib.h>

#include "encoder/gz.h"
#include "encoder/pprof.h"
#include "profile.pb-c.h"
#include "tests/harness.h"

static uint8_t *gunzip(const uint8_t *in, size_t len, size_t *out_len)
{
	size_t cap = 1 << 20;
	uint8_t *out = malloc(cap);
	z_stream z = { 0 };

	ASSERT(out);
	ASSERT_EQ(inflateInit2(&z, 15 + 16), Z_OK);
	z.next_in = (Bytef *)in;
	z.avail_in = (uInt)len;
	z.next_out = out;
	z.avail_out = (uInt)cap;
	ASSERT_EQ(inflate(&z, Z_FINISH), Z_STREAM_END);
	*out_len = z.total_out;
	inflateEnd(&z);
	return out;
}

static const char *str(const Perftools__Profiles__Profile *p, int64_t i)
{
	ASSERT(i >= 0 && (size_t)i < p->n_string_table);
	return p->string_table[i];
}

TEST(pprof_round_trip)
{
	struct enc_pprof *e;
	uint8_t *gz, *raw;
	size_t gzlen, rawlen;
	Perftools__Profiles__Profile *p;
	int64_t m1, m2, f_hot, f_main, l1, l2, l3;

	ASSERT_OK(enc_pprof_new(&e));
	ASSERT_OK(enc_pprof_sample_type(e, "samples", "count"));
	ASSERT_OK(enc_pprof_sample_type(e, "cpu", "nanoseconds"));
	ASSERT_OK(enc_pprof_period(e, "cpu", "nanoseconds", 10000000));
	enc_pprof_time(e, 1700000000000000000ll, 5000000000ll);
	ASSERT_OK(enc_pprof_comment(e, "hello"));
	m1 = enc_pprof_mapping(e, 0x1000, 0x2000, 0, "/bin/app", "abcd", 1);
	m2 = enc_pprof_mapping(e, 0x7000, 0x9000, 0x1000, "/lib/libc.so.6", "", 1);
	ASSERT_EQ(m1, 1);
	ASSERT_EQ(m2, 2);
	f_hot = enc_pprof_function(e, "hot");
	f_main = enc_pprof_function(e, "main");
	ASSERT_EQ(enc_pprof_function(e, "hot"), f_hot);   /* deduplicated */
	l1 = enc_pprof_location(e, 1, 0x1010, (uint64_t)f_hot);
	l2 = enc_pprof_location(e, 1, 0x1100, (uint64_t)f_main);
	l3 = enc_pprof_location(e, 2, 0x7123, (uint64_t)enc_pprof_function(e, "libc.so.6+0x7123"));
	ASSERT_EQ(l1, 1);
	ASSERT_EQ(l2, 2);
	ASSERT_EQ(l3, 3);
	uint64_t s1[] = { 1, 2 }, s2[] = { 3, 2 }, bad[] = { 9 };
	int64_t v1[] = { 7, 70000000 }, v2[] = { 3, 30000000 };

	struct enc_label lab[2] = { { .key = "thread", .str = "worker-1" },
				    { .key = "tid", .num = 4242, .unit = "id" } };
	struct enc_label nokey = { .key = "", .str = "x" };

	ASSERT_OK(enc_pprof_sample_labels(e, s1, 2, v1, 2, lab, 2));
	ASSERT_EQ(enc_pprof_sample_labels(e, s1, 2, v1, 2, &nokey, 1), -EINVAL);
	ASSERT_OK(enc_pprof_sample(e, s2, 2, v2, 2));
	ASSERT_EQ(enc_pprof_sample(e, bad, 1, v2, 2), -EINVAL);   /* unknown location */
	ASSERT_EQ(enc_pprof_sample(e, s1, 2, v2, 1), -EINVAL);    /* wrong value count */
	ASSERT_OK(enc_pprof_encode(e, 1 << 20, &gz, &gzlen));
	ASSERT(gzlen > 2 && gz[0] == 0x1f && gz[1] == 0x8b);
	/* Encoding twice gives the same bytes. */
	{
		uint8_t *gz2;
		size_t len2;

		ASSERT_OK(enc_pprof_encode(e, 1 << 20, &gz2, &len2));
		ASSERT_EQ(len2, gzlen);
		ASSERT(!memcmp(gz, gz2, gzlen));
		free(gz2);
	}
	ASSERT_EQ(enc_pprof_encode(e, 10, &raw, &rawlen), -E2BIG);
	enc_pprof_free(e);

	raw = gunzip(gz, gzlen, &rawlen);
	p = perftools__profiles__profile__unpack(NULL, rawlen, raw);
	ASSERT(p != NULL);
	ASSERT_STR_EQ(p->string_table[0], "");
	ASSERT_EQ(p->n_sample_type, 2);
	ASSERT_STR_EQ(str(p, p->sample_type[0]->type), "samples");
	ASSERT_STR_EQ(str(p, p->sample_type[1]->unit), "nanoseconds");
	ASSERT_STR_EQ(str(p, p->period_type->type), "cpu");
	ASSERT_EQ(p->period, 10000000);
	ASSERT_EQ(p->time_nanos, 1700000000000000000ll);
	ASSERT_EQ(p->duration_nanos, 5000000000ll);
	ASSERT_EQ(p->n_comment, 1);
	ASSERT_STR_EQ(str(p, p->comment[0]), "hello");
	/* IDs 1..n in array order (Parca), every reference resolvable. */
	for (size_t i = 0; i < p->n_mapping; i++)
		ASSERT_EQ(p->mapping[i]->id, i + 1);
	for (size_t i = 0; i < p->n_function; i++) {
		ASSERT_EQ(p->function[i]->id, i + 1);
		ASSERT(p->function[i]->name > 0);
	}
	for (size_t i = 0; i < p->n_location; i++) {
		ASSERT_EQ(p->location[i]->id, i + 1);
		ASSERT(p->location[i]->address != 0);
		ASSERT(p->location[i]->mapping_id >= 1 && p->location[i]->mapping_id <= p->n_mapping);
		ASSERT_EQ(p->location[i]->n_line, 1);
		ASSERT(p->location[i]->line[0]->function_id >= 1 &&
		       p->location[i]->line[0]->function_id <= p->n_function);
	}
	ASSERT_EQ(p->n_sample, 2);
	for (size_t i = 0; i < p->n_sample; i++) {
		ASSERT_EQ(p->sample[i]->n_value, 2);
		for (size_t k = 0; k < p->sample[i]->n_location_id; k++)
			ASSERT(p->sample[i]->location_id[k] >= 1 &&
			       p->sample[i]->location_id[k] <= p->n_location);
	}
	ASSERT_EQ(p->sample[0]->location_id[0], 1);   /* leaf first */
	ASSERT_EQ(p->sample[0]->n_label, 2);
	ASSERT_STR_EQ(str(p, p->sample[0]->label[0]->key), "thread");
	ASSERT_STR_EQ(str(p, p->sample[0]->label[0]->str), "worker-1");
	ASSERT_STR_EQ(str(p, p->sample[0]->label[1]->key), "tid");
	ASSERT_EQ(p->sample[0]->label[1]->num, 4242);
	ASSERT_STR_EQ(str(p, p->sample[0]->label[1]->num_unit), "id");
	ASSERT_EQ(p->sample[1]->n_label, 0);
	ASSERT_EQ(p->sample[1]->value[1], 30000000);
	ASSERT_STR_EQ(str(p, p->mapping[0]->filename), "/bin/app");
	ASSERT_STR_EQ(str(p, p->mapping[0]->build_id), "abcd");
	ASSERT(p->mapping[1]->has_functions);
	ASSERT_STR_EQ(str(p, p->function[p->location[2]->line[0]->function_id - 1]->name),
		      "libc.so.6+0x7123");
	perftools__profiles__profile__free_unpacked(p, NULL);
	free(raw);
	free(gz);
}

TEST(gzip_empty_and_large)
{
	uint8_t *out, *back, *big = malloc(1 << 20);
	size_t len, blen;

	ASSERT_OK(enc_gz_compress((const uint8_t *)"", 0, 1024, &out, &len));
	back = gunzip(out, len, &blen);
	ASSERT_EQ(blen, 0);
	free(out);
	free(back);
	for (size_t i = 0; i < (1 << 20); i++)
		big[i] = (uint8_t)(i * 2654435761u >> 24);
	ASSERT_OK(enc_gz_compress(big, 1 << 20, 4 << 20, &out, &len));
	back = gunzip(out, len, &blen);
	ASSERT_EQ(blen, 1 << 20);
	ASSERT(!memcmp(back, big, blen));
	free(out);
	free(back);
	free(big);
}
