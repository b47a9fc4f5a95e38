/* SPDX-License-Identifier: MIT */
/*
 * Mutation fuzzing, short and deterministic, of every parser that reads
 * untrusted bytes: GGUF headers, safetensors headers, manifests,
 * identities, --require lists, escaped tensor names, Authorization
 * headers, token files, --tls-pin and --seed lists.  Each starts from a
 * valid input and applies random byte flips, truncations, insertions
 * and splices; a parser must answer 0 or an error, never crash or read
 * out of bounds (the ASan build runs this too), and what it accepts must
 * hold its invariants.  SEEDFS_FUZZ_ITERS sets the iterations per target
 * (default 20000); the seed is fixed, so a failure reproduces.
 */
#include "common/util.h"
#include "metadata/auth.h"
#include "metadata/control.h"
#include "metadata/gguf.h"
#include "metadata/identity.h"
#include "metadata/manifest.h"
#include "metadata/safetensors.h"
#include "metadata/tls.h"
#include "metadata/tname.h"

#include "check_run.h"

#include <check.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char err[512];
static uint64_t rng = 0x9e3779b97f4a7c15ull;

static uint64_t next(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

static long iters(void)
{
	const char *e = getenv("SEEDFS_FUZZ_ITERS");
	return e ? atol(e) : 20000;
}

/* A mutated copy of @in (malloc'd, exactly *len bytes, no slack). */
static uint8_t *mutate(const uint8_t *in, size_t n, size_t *len)
{
	size_t cap = n + 64;
	uint8_t *b = malloc(cap);
	memcpy(b, in, n);
	size_t m = n;
	int rounds = 1 + (int)(next() % 4);
	for (int r = 0; r < rounds; r++) {
		size_t at = m ? (size_t)(next() % m) : 0;
		switch (next() % 6) {
		case 0: /* flip bits */
			if (m)
				b[at] ^= (uint8_t)(1u << (next() % 8));
			break;
		case 1: /* a random byte */
			if (m)
				b[at] = (uint8_t)next();
			break;
		case 2: /* an interesting byte */
		{
			static const uint8_t v[] = {0,	 0xff, 0x7f, 0x80,
						    '"', '\\', '{',  '[',
						    ',', '9'};
			if (m)
				b[at] = v[next() % sizeof(v)];
			break;
		}
		case 3: /* truncate */
			m = at;
			break;
		case 4: /* insert */
			if (m + 8 < cap) {
				size_t k = 1 + (size_t)(next() % 8);
				memmove(b + at + k, b + at, m - at);
				for (size_t i = 0; i < k; i++)
					b[at + i] = (uint8_t)next();
				m += k;
			}
			break;
		default: /* copy a run over another place */
			if (m > 16) {
				size_t from = (size_t)(next() % (m - 8));
				size_t to = (size_t)(next() % (m - 8));
				memmove(b + to, b + from, 8);
			}
		}
	}
	/* Exactly m bytes: ASan sees any read past them. */
	uint8_t *out = malloc(m ? m : 1);
	memcpy(out, b, m);
	free(b);
	*len = m;
	return out;
}

/* Text inputs: the same, NUL-terminated right after. */
static char *mutate_text(const char *in, size_t *len)
{
	uint8_t *b = mutate((const uint8_t *)in, strlen(in), len);
	char *s = malloc(*len + 1);
	memcpy(s, b, *len);
	s[*len] = '\0';
	free(b);
	return s;
}

/* A valid GGUF file: metadata of several types, two tensors. */
static size_t gguf_sample(uint8_t *buf)
{
	size_t n = 0;
#define PUT(v, k)                                                              \
	do {                                                                   \
		uint64_t x_ = (v);                                             \
		for (int i_ = 0; i_ < (k); i_++)                               \
			buf[n++] = (uint8_t)(x_ >> (8 * i_));                  \
	} while (0)
#define STR(s)                                                                 \
	do {                                                                   \
		PUT(strlen(s), 8);                                             \
		memcpy(buf + n, s, strlen(s));                                 \
		n += strlen(s);                                                \
	} while (0)
	memcpy(buf, "GGUF", 4);
	n = 4;
	PUT(3, 4);
	PUT(2, 8);
	PUT(3, 8);
	STR("general.name");
	PUT(8, 4);
	STR("x");
	STR("general.alignment");
	PUT(4, 4);
	PUT(32, 4);
	STR("arr");
	PUT(9, 4);
	PUT(9, 4);
	PUT(1, 8);
	PUT(5, 4);
	PUT(2, 8);
	PUT(7, 4);
	PUT(8, 4);
	STR("a");
	PUT(2, 4);
	PUT(32, 8);
	PUT(2, 8);
	PUT(8, 4);
	PUT(0, 8);
	STR("b");
	PUT(1, 4);
	PUT(4, 8);
	PUT(0, 4);
	PUT(96, 8);
	while (n % 32)
		buf[n++] = 0;
	memset(buf + n, 0x5a, 128);
	return n + 128;
#undef PUT
#undef STR
}

START_TEST(gguf)
{
	static uint8_t base[4096];
	size_t bn = gguf_sample(base);
	struct sfs_gguf *g;
	ck_assert_int_eq(sfs_gguf_parse(base, bn, &g, err, sizeof(err)), 0);
	sfs_gguf_free(g);
	long ok = 0;
	for (long i = 0; i < iters(); i++) {
		size_t n;
		uint8_t *b = mutate(base, bn, &n);
		int rc = sfs_gguf_parse(b, n, &g, err, sizeof(err));
		ck_assert(rc == 0 || rc == -EINVAL);
		if (!rc) {
			ok++;
			for (size_t t = 0; t < g->ntensors; t++)
				ck_assert(g->tensors[t].off <= n &&
					  g->tensors[t].len <=
						  n - g->tensors[t].off);
			sfs_gguf_free(g);
		} else {
			ck_assert(err[0]);
		}
		free(b);
	}
	printf("gguf: %ld of %ld mutants accepted\n", ok, iters());
}
END_TEST

START_TEST(safetensors)
{
	const char *base =
		"{\"__metadata__\":{\"format\":\"pt\"},"
		"\"a\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,"
		"24]},\"b\":{\"dtype\":\"BF16\",\"shape\":[4],\"data_offsets\":"
		"[24,32]}}";
	long ok = 0;
	for (long i = 0; i < iters(); i++) {
		size_t n;
		char *j = mutate_text(base, &n);
		struct sfs_st_header *h = NULL;
		int rc = sfs_st_parse(j, n, 8 + n + 32, &h, err, sizeof(err));
		ck_assert(rc == 0 || rc == -EINVAL || rc == -E2BIG);
		if (!rc) {
			ok++;
			for (size_t t = 0; t < h->ntensors; t++)
				ck_assert(h->tensors[t].begin <=
						  h->tensors[t].end &&
					  h->tensors[t].end <= 32);
			sfs_st_free(h);
		}
		free(j);
	}
	printf("safetensors: %ld of %ld mutants accepted\n", ok, iters());
}
END_TEST

START_TEST(manifest)
{
	struct sfs_manifest *m = sfs_manifest_new("m", 3), *d;
	uint8_t addr[16] = {1, 2, 3};
	uint64_t shape[2] = {2, 3};
	uint32_t r;
	size_t f;
	char *base;
	size_t bl;
	ck_assert_int_eq(
		sfs_manifest_add_endpoint(m, "tcp", "tcp;ofi_rxm",
					  "FI_OFI_RXM_BUFFER_SIZE=1024", addr,
					  sizeof(addr)),
		0);
	ck_assert_int_eq(sfs_manifest_add_region(m, 100, &r), 0);
	sfs_manifest_set_remote(m, r, 0, 0x1000, 7);
	ck_assert_int_eq(sfs_manifest_add_dir(m, "d"), 0);
	ck_assert_int_eq(sfs_manifest_add_file(m, "d/x.safetensors", &f), 0);
	ck_assert_int_eq(sfs_manifest_add_inline(m, f, "hdr", 3), 0);
	ck_assert_int_eq(sfs_manifest_add_remote(m, f, r, 0, 100), 0);
	ck_assert_int_eq(
		sfs_manifest_add_tensor(m, "t", "F32", 2, shape, f, 3, 24), 0);
	m->tensors[0].has_xxh3 = 1;
	m->files[f].has_xxh3 = 1;
	m->files[f].xxh3 = 0xabcdef;
	uint64_t sums[1] = {42};
	ck_assert_int_eq(sfs_manifest_set_checksums(m, f, 12, sums, 1), 0);
	sfs_identity_set(&m->id, "quant", "fp8", err, sizeof(err));
	ck_assert_int_eq(sfs_manifest_encode(m, &base, &bl), 0);
	sfs_manifest_free(m);
	ck_assert_int_eq(sfs_manifest_decode(base, bl, &d, err, sizeof(err)),
			 0);
	sfs_manifest_free(d);
	long ok = 0;
	for (long i = 0; i < iters(); i++) {
		size_t n;
		char *j = mutate_text(base, &n);
		d = NULL;
		int rc = sfs_manifest_decode(j, n, &d, err, sizeof(err));
		ck_assert(rc == 0 || rc == -EINVAL);
		if (!rc) {
			ok++;
			/* Accepted: it passes validation again. */
			ck_assert_int_eq(
				sfs_manifest_validate(d, err, sizeof(err)), 0);
			sfs_manifest_free(d);
		} else {
			ck_assert_ptr_null(d);
		}
		free(j);
	}
	free(base);
	printf("manifest: %ld of %ld mutants accepted\n", ok, iters());
}
END_TEST

START_TEST(small_parsers)
{
	struct sfs_identity id;
	char *canon;
	sfs_identity_init(&id, "m", 1);
	sfs_identity_set_params(&id, "{\"bits\":4,\"group\":[128]}", err,
				sizeof(err));
	ck_assert_int_eq(sfs_identity_canonical(&id, &canon), 0);
	sfs_identity_clear(&id);
	for (long i = 0; i < iters(); i++) {
		size_t n;
		char *j = mutate_text(canon, &n);
		sfs_identity_init(&id, "m", 1);
		int rc = sfs_identity_from_json(&id, j, n, err, sizeof(err));
		ck_assert(rc == 0 || rc == -EINVAL);
		if (!rc)
			ck_assert_int_eq(
				sfs_identity_check(&id, err, sizeof(err)), 0);
		sfs_identity_clear(&id);
		free(j);

		char *q = mutate_text("quant=fp8,tp_rank=3,layout=checkpoint",
				      &n);
		struct sfs_require *r = NULL;
		rc = sfs_require_parse(q, &r, err, sizeof(err));
		ck_assert(rc == 0 || rc == -EINVAL);
		sfs_require_free(r);
		free(q);

		char *e = mutate_text("a%2Fb%25c%2Ejson", &n), out[64];
		rc = sfs_tname_unescape(e, out, sizeof(out));
		ck_assert(rc == 0 || rc == -EINVAL || rc == -ENAMETOOLONG);
		if (!rc) {
			/* Escaping what came out gives a name that
			 * unescapes to it again. */
			char esc[256], back[64];
			if (out[0] &&
			    !sfs_tname_escape(out, 0, esc, sizeof(esc))) {
				ck_assert_int_eq(
					sfs_tname_unescape(esc, back,
							   sizeof(back)),
					0);
				ck_assert_str_eq(back, out);
			}
		}
		free(e);
	}
	free(canon);
}
END_TEST

static int token_char(char c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
	       (c >= '0' && c <= '9') || strchr("-._~+/=", c);
}

START_TEST(auth_parsers)
{
	static const char *const headers[] = {
		"Bearer 0123456789abcdef0123456789abcdef",
		"bearer   a-b.c_d~e+f/g==  ", "Basic dXNlcjpwYXNz"};
	static const char *const files[] = {
		"0123456789abcdef0123456789abcdef\n",
		"  tok-tok-tok-tok-tok\r\n", "0123456789abcdef\nsecond\n"};
	static const char *const pins[] = {
		"sha256//erFIUM2u3Iopm4C1kj1NksJCJ9Gu5MD/jsZnjPGsGjI=",
		"7ab14850cdaedc8a299b80b5923d4d92c24227d1aee4c0ff8ec6678cf1ac1a32",
		"sha256:7a:b1:48:50:cd:ae:dc:8a:29:9b:80:b5:92:3d:4d:92:c2:42:27:d1:"
		"ae:e4:c0:ff:8e:c6:67:8c:f1:ac:1a:32"};
	static const char *const seeds[] = {"https://10.0.0.1:7070,b:2/",
					    "[::1]:7070,http://h:1"};
	long accepted[4] = {0};
	for (long i = 0; i < iters(); i++) {
		size_t n, off, len;
		const char *tok;
		char *h = mutate_text(headers[i % 3], &n);
		int rc = sfs_auth_parse_bearer(h, &tok, &len);
		ck_assert(rc == 0 || rc == -EBADMSG);
		if (!rc) {
			ck_assert(tok >= h && tok + len <= h + n);
			ck_assert(len > 0 && len <= SFS_AUTH_TOKEN_MAX);
			for (size_t k = 0; k < len; k++)
				ck_assert(token_char(tok[k]));
			accepted[0]++;
		}
		free(h);

		uint8_t *f = mutate((const uint8_t *)files[i % 3],
				    strlen(files[i % 3]), &n);
		rc = sfs_auth_parse_token((const char *)f, n, &off, &len, err,
					  sizeof(err));
		ck_assert(rc == 0 || rc == -EINVAL);
		if (!rc) {
			ck_assert(off + len <= n);
			ck_assert(len >= SFS_AUTH_TOKEN_MIN &&
				  len <= SFS_AUTH_TOKEN_MAX);
			for (size_t k = 0; k < len; k++)
				ck_assert(token_char((char)f[off + k]));
			accepted[1]++;
		} else {
			ck_assert(*err);
		}
		free(f);

		char *p = mutate_text(pins[i % 3], &n), out[SFS_TLS_PIN_MAX];
		rc = sfs_tls_parse_pin(p, out, sizeof(out), err, sizeof(err));
		ck_assert(rc == 0 || rc == -EINVAL);
		if (!rc) {
			ck_assert_uint_eq(strlen(out), 52);
			ck_assert(!strncmp(out, "sha256//", 8));
			/* What it prints parses back to itself. */
			char again[SFS_TLS_PIN_MAX];
			ck_assert_int_eq(sfs_tls_parse_pin(out, again,
							   sizeof(again), err,
							   sizeof(err)),
					 0);
			ck_assert_str_eq(again, out);
			accepted[2]++;
		}
		free(p);

		char *l = mutate_text(seeds[i % 2], &n), *list[8];
		size_t ns = 0;
		int https = -1;
		rc = sfs_control_parse_seeds(l, "--seed", list, 8, &ns, &https,
					     err, sizeof(err));
		ck_assert(rc == 0 || rc == -EINVAL || rc == -E2BIG);
		ck_assert(ns <= 8);
		for (size_t k = 0; k < ns; k++) {
			char hh[256], pp[16];
			ck_assert_int_eq(sfs_parse_hostport(list[k], hh,
							    sizeof(hh), pp,
							    sizeof(pp)),
					 0);
			ck_assert(!strpbrk(hh, "/?#@ "));
			free(list[k]);
		}
		accepted[3] += !rc;
		free(l);
	}
	printf("auth: accepted %ld headers, %ld token files, %ld pins, %ld "
	       "seed lists of %ld each\n",
	       accepted[0], accepted[1], accepted[2], accepted[3], iters());
	ck_assert(accepted[0] && accepted[1] && accepted[2] && accepted[3]);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("fuzz");
	TCase *t = tcase_create("fuzz");
	tcase_set_timeout(t, 120);
	tcase_add_test(t, gguf);
	tcase_add_test(t, safetensors);
	tcase_add_test(t, manifest);
	tcase_add_test(t, small_parsers);
	tcase_add_test(t, auth_parsers);
	suite_add_tcase(s, t);
	return sfs_check_run(s);
}
