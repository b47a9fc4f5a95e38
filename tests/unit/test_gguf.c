/* SPDX-License-Identifier: MIT */
/* Unit tests: GGUF header validation (metadata/gguf), one per rule. */
#include "metadata/gguf.h"

#include "bound.h"
#include "check_run.h"

#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

static char err[512];

/* A little GGUF writer: the file grows in buf. */
struct w {
	uint8_t buf[1 << 16];
	size_t n;
};

static void put(struct w *w, uint64_t v, unsigned int bytes)
{
	for (unsigned int i = 0; i < bytes; i++)
		w->buf[w->n++] = (uint8_t)(v >> (8 * i));
}

static void put_str(struct w *w, const char *s)
{
	put(w, strlen(s), 8);
	memcpy(w->buf + w->n, s, strlen(s));
	w->n += strlen(s);
}

static void pad(struct w *w, size_t a)
{
	while (w->n % a)
		w->buf[w->n++] = 0;
}

/* What a mutation may change in the sample. */
struct opt {
	const char *magic;
	uint32_t version;
	uint64_t ntensors_said; /* 0: the real count */
	uint64_t nkv_said;
	int bad_kv_type;
	int deep_array;
	uint64_t huge_array;
	int long_string;
	int alignment_type; /* 0: u32 */
	uint32_t alignment;
	uint32_t ndim;	/* of tensor 1; 0: 2 */
	uint64_t ne0;	/* of tensor 1 (a Q8_0); 0: 64 */
	uint32_t type1; /* ggml type of tensor 1; 0: Q8_0 (8) */
	uint64_t off1;	/* offset of tensor 1; ~0: the right one */
	const char *name1;
	size_t cut;    /* truncate the file to this many bytes */
	int drop_data; /* end the file with the header */
};

static size_t sample(struct w *w, const struct opt *o)
{
	uint32_t align = o->alignment ? o->alignment : 32;
	w->n = 0;
	memcpy(w->buf, o->magic ? o->magic : "GGUF", 4);
	w->n = 4;
	put(w, o->version ? o->version : 3, 4);
	put(w, o->ntensors_said ? o->ntensors_said : 2, 8);
	put(w, o->nkv_said ? o->nkv_said : 4, 8);
	/* kv 1: a string */
	put_str(w, "general.name");
	put(w, o->bad_kv_type ? 13 : 8, 4);
	if (o->long_string)
		put(w, (uint64_t)SFS_GGUF_STR_MAX + 1, 8);
	else
		put_str(w, "tiny");
	/* kv 2: an array of strings (or something nasty) */
	put_str(w, "tokenizer.ggml.tokens");
	put(w, 9, 4);
	if (o->deep_array) {
		for (int i = 0; i < 6; i++) {
			put(w, 9, 4);
			put(w, 1, 8);
		}
		put(w, 4, 4);
		put(w, 1, 8);
		put(w, 7, 4);
	} else {
		put(w, 8, 4);
		put(w, o->huge_array ? o->huge_array : 2, 8);
		put_str(w, "a");
		put_str(w, "bc");
	}
	/* kv 3: an array of u32 */
	put_str(w, "some.ids");
	put(w, 9, 4);
	put(w, 4, 4);
	put(w, 3, 8);
	put(w, 1, 4);
	put(w, 2, 4);
	put(w, 3, 4);
	/* kv 4: the alignment */
	put_str(w, "general.alignment");
	put(w, o->alignment_type ? (uint64_t)o->alignment_type : 4, 4);
	put(w, align, 4);
	/* tensor 0: F32 [3, 5] (ne 5, 3) at 0 */
	put_str(w, "tok_embd.weight");
	put(w, 2, 4);
	put(w, 5, 8);
	put(w, 3, 8);
	put(w, 0, 4);
	put(w, 0, 8);
	/* tensor 1: Q8_0 [2, 64] at 64 (after 60 bytes of tensor 0) */
	put_str(w, o->name1 ? o->name1 : "blk.0.attn_q.weight");
	uint32_t nd = o->ndim ? o->ndim : 2;
	put(w, nd, 4);
	put(w, o->ne0 ? o->ne0 : 64, 8);
	for (uint32_t d = 1; d < nd; d++)
		put(w, 2, 8);
	put(w, o->type1 ? o->type1 : 8, 4);
	put(w, o->off1 != (uint64_t)~0ull ? o->off1 : 64, 8);
	pad(w, align);
	size_t data = w->n;
	if (!o->drop_data) {
		memset(w->buf + w->n, 0xab, 64 + 2 * 2 * 34);
		w->n += 64 + 2 * 2 * 34;
	}
	if (o->cut)
		w->n = o->cut;
	return data;
}

static struct opt base(void)
{
	struct opt o;
	memset(&o, 0, sizeof(o));
	o.off1 = ~0ull;
	return o;
}

START_TEST(valid)
{
	static struct w w;
	struct opt o = base();
	size_t data = sample(&w, &o);
	struct sfs_gguf *g;
	ck_assert_int_eq(sfs_gguf_parse(w.buf, w.n, &g, err, sizeof(err)), 0);
	ck_assert_uint_eq(g->version, 3);
	ck_assert_uint_eq(g->nkv, 4);
	ck_assert_uint_eq(g->alignment, 32);
	ck_assert_uint_eq(g->data_off, data);
	ck_assert_uint_eq(g->ntensors, 2);
	ck_assert_str_eq(g->tensors[0].name, "tok_embd.weight");
	ck_assert_str_eq(g->tensors[0].dtype, "F32");
	ck_assert_uint_eq(g->tensors[0].ndim, 2);
	ck_assert_uint_eq(g->tensors[0].shape[0], 3); /* row-major */
	ck_assert_uint_eq(g->tensors[0].shape[1], 5);
	ck_assert_uint_eq(g->tensors[0].off, data);
	ck_assert_uint_eq(g->tensors[0].len, 60);
	ck_assert_str_eq(g->tensors[1].dtype, "Q8_0");
	ck_assert_uint_eq(g->tensors[1].off, data + 64);
	ck_assert_uint_eq(g->tensors[1].len, 2 * 2 * 34);
	sfs_gguf_free(g);
	/* Another alignment moves the data section. */
	o.alignment = 64;
	data = sample(&w, &o);
	ck_assert_int_eq(sfs_gguf_parse(w.buf, w.n, &g, err, sizeof(err)), 0);
	ck_assert_uint_eq(g->data_off % 64, 0);
	ck_assert_uint_eq(g->data_off, data);
	sfs_gguf_free(g);
}
END_TEST

/* A header parsed from the first bytes of the file alone (the seed's
 * copy of a mapping that may shrink): -EAGAIN while they fall short of
 * it, the whole file's answer once they cover it, whatever the file's
 * size says; a bad header is refused the same from any cut. */
START_TEST(parse_head)
{
	static struct w w;
	struct opt o = base();
	size_t data = sample(&w, &o);
	uint64_t size = w.n + (64u << 20); /* the data runs on, unread */
	struct sfs_gguf *g = NULL;
	size_t hdr = 0;
	for (size_t k = 0; k < data; k++) {
		int rc = sfs_gguf_parse_head(w.buf, k, size, &g, err,
					     sizeof(err));
		if (!rc) {
			hdr = k;
			break;
		}
		ck_assert_msg(rc == -EAGAIN, "head %zu: %d (%s)", k, rc, err);
	}
	ck_assert_uint_gt(hdr, 24);
	ck_assert_uint_le(hdr, data);
	ck_assert_uint_eq(g->data_off, data);
	ck_assert_uint_eq(g->ntensors, 2);
	sfs_gguf_free(g);
	/* The whole file as the head: the plain parse, never -EAGAIN. */
	ck_assert_int_eq(
		sfs_gguf_parse_head(w.buf, 10, 10, &g, err, sizeof(err)),
		-EINVAL);
	/* A count no file could hold (2^40 array elements in a file of 64
	 * MiB): refused from the first cut, never read further for. */
	o = base();
	o.huge_array = 1ull << 40;
	sample(&w, &o);
	ck_assert_int_eq(
		sfs_gguf_parse_head(w.buf, 1024, size, &g, err, sizeof(err)),
		-EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "runs past the end"));
	/* A bad magic: refused from the first cut that shows it. */
	o.magic = "GGUX";
	sample(&w, &o);
	ck_assert_int_eq(
		sfs_gguf_parse_head(w.buf, 100, size, &g, err, sizeof(err)),
		-EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "magic"));
}
END_TEST

START_TEST(ggml_sizes)
{
	uint64_t shape[2] = {3, 512}, n;
	ck_assert_int_eq(sfs_ggml_tensor_bytes("Q4_K", shape, 2, &n), 0);
	ck_assert_uint_eq(n, 3 * 2 * 144);
	ck_assert_int_eq(sfs_ggml_tensor_bytes("Q6_K", shape, 2, &n), 0);
	ck_assert_uint_eq(n, 3 * 2 * 210);
	ck_assert_int_eq(sfs_ggml_tensor_bytes("F16", shape, 2, &n), 0);
	ck_assert_uint_eq(n, 3 * 512 * 2);
	shape[1] = 100;
	ck_assert_int_eq(sfs_ggml_tensor_bytes("Q4_0", shape, 2, &n), -EINVAL);
	ck_assert_int_eq(sfs_ggml_tensor_bytes("Q4_2", shape, 2, &n), -ENOENT);
	uint64_t big[2] = {UINT64_MAX / 2, 32};
	ck_assert_int_eq(sfs_ggml_tensor_bytes("Q8_0", big, 2, &n), -EOVERFLOW);
}
END_TEST

/* One bad header per rule: each refused with a line naming it. */
static const struct bad {
	const char *what;
	const char *needle;
	struct opt o;
} bads[] = {
	{"magic", "magic: not \"GGUF\"", {.magic = "GGML"}},
	{"version 2", "version 2: this build reads 3", {.version = 2}},
	{"version 4", "version 4", {.version = 4}},
	{"tensor count cap",
	 "tensor count 2000000",
	 {.ntensors_said = 2000000}},
	{"kv count cap", "metadata count 5000000", {.nkv_said = 5000000}},
	{"kv count past end", "metadata key: string of", {.nkv_said = 900}},
	{"tensor count past end", "tensor 2 name", {.ntensors_said = 3}},
	{"unknown value type",
	 "'general.name': unknown value type 13",
	 {.bad_kv_type = 1}},
	{"string too long", "string of 16777217 bytes", {.long_string = 1}},
	{"arrays too deep", "nested deeper than 4", {.deep_array = 1}},
	{"array past end",
	 "runs past the end of the file",
	 {.huge_array = 1ull << 40}},
	{"alignment type", "general.alignment: type 5", {.alignment_type = 5}},
	{"alignment not a power of two",
	 "general.alignment: 48",
	 {.alignment = 48}},
	{"no dims", "0 dimensions", {.ndim = 0xffffffff}},
	{"too many dims", "5 dimensions", {.ndim = 5}},
	{"negative dim", "is negative", {.ne0 = 1ull << 63}},
	{"unknown ggml type", "unknown ggml type 4", {.type1 = 4}},
	{"retired ggml type", "unknown ggml type 31", {.type1 = 31}},
	{"not whole blocks", "not whole blocks of 32", {.ne0 = 48}},
	{"size overflow", "size overflows", {.ne0 = 1ull << 62, .ndim = 4}},
	{"unaligned offset",
	 "is not a multiple of the alignment",
	 {.off1 = 40}},
	{"offset past end", "run past the end of the file", {.off1 = 1 << 20}},
	{"overlap", "overlap", {.off1 = 32}},
	{"duplicate name",
	 "'tok_embd.weight': listed twice",
	 {.name1 = "tok_embd.weight"}},
	{"name too long",
	 "tensor 1 name: string of 70 bytes",
	 {.name1 =
		  "0123456789012345678901234567890123456789012345678901234567890123456789"}},
	{"empty name", "tensor 1: name is empty", {.name1 = ""}},
	{"short file", "too short for a GGUF header", {.cut = 20}},
	{"truncated in metadata", "the file ends", {.cut = 100}},
	{"data past end", "run past the end of the file", {.drop_data = 1}},
};

/* Whether @b is refused (-EINVAL, nothing returned) with a line naming
 * its rule; says why not. */
static int refused_naming_rule(const struct bad *b)
{
	static struct w w;
	struct opt o = b->o;
	if (!o.off1)
		o.off1 = ~0ull;
	if (o.ndim == 0xffffffff)
		o.ndim = 0; /* sample() would default it */
	struct sfs_gguf *g = NULL;
	if (b->o.ndim == 0xffffffff) {
		/* Write 2 dims, then patch the count to 0. */
		o.ndim = 2;
		sample(&w, &o);
		const char *n = "blk.0.attn_q.weight";
		uint8_t *p = memmem(w.buf, w.n, n, strlen(n));
		ck_assert_ptr_nonnull(p);
		memset(p + strlen(n), 0, 4);
	} else {
		sample(&w, &o);
	}
	err[0] = '\0';
	int rc = sfs_gguf_parse(w.buf, w.n, &g, err, sizeof(err));
	if (rc != -EINVAL || g) {
		printf("%s: parse returned %d, %s\n", b->what, rc,
		       g ? "a header" : "nothing");
		sfs_gguf_free(g);
		return 0;
	}
	if (!strstr(err, b->needle)) {
		printf("%s: '%s' lacks '%s'\n", b->what, err, b->needle);
		return 0;
	}
	return 1;
}

/* Every bad header of the list refused naming its rule: as many as the
 * list holds, 29 (docs/claims.md). */
START_TEST(rejects)
{
	int n = 0;
	for (size_t i = 0; i < sizeof(bads) / sizeof(bads[0]); i++)
		n += refused_naming_rule(&bads[i]);
	SFS_TEST_BOUND_EQ("refused_naming_rule", 29, n);
	SFS_TEST_BOUND_EQ("bad_headers_listed", 29,
			  sizeof(bads) / sizeof(bads[0]));
	ck_assert_int_eq(n, (int)(sizeof(bads) / sizeof(bads[0])));
}
END_TEST

int main(void)
{
	Suite *s = suite_create("gguf");
	TCase *t = tcase_create("gguf");
	tcase_add_test(t, valid);
	tcase_add_test(t, parse_head);
	tcase_add_test(t, ggml_sizes);
	tcase_add_test(t, rejects);
	suite_add_tcase(s, t);
	return sfs_check_run(s);
}
