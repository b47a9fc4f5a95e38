/* SPDX-License-Identifier: MIT */
/*
 * Mutation fuzzing, short and deterministic, of every parser that reads
 * untrusted bytes: GGUF headers, safetensors headers, manifests,
 * identities, --require lists, escaped tensor names, Authorization
 * headers, token files, --tls-pin and --seed lists; and of what comes
 * over the network: the JSON scan before every parse (against jansson's
 * own count), a re-seeder's holdings, etcd watch messages and range
 * answers and the registry's records in them, /v1/models and
 * /v1/sources answers, a re-seeder's announcement and the read report
 * in a replica's query (the seed's).  Each starts from valid inputs and
 * applies random byte flips, truncations, insertions and splices; a
 * parser must answer 0 or an error, never crash or read out of bounds
 * (the ASan build runs this too), and what it accepts must hold its
 * invariants.  SEEDFS_FUZZ_ITERS sets the iterations per target
 * (default 20000); the seed is fixed, so a failure reproduces.
 */
#include "cache/cache.h"
#include "common/util.h"
#include "control/auth.h"
#include "control/control.h"
#include "metadata/gguf.h"
#include "metadata/identity.h"
#include "metadata/jsonlim.h"
#include "metadata/manifest.h"
#include "control/registry.h"
#include "control/signstate.h"
#include "metadata/safetensors.h"
#include "control/tls.h"
#include "metadata/tname.h"
#include "replica/parse.h"
#include "seed/announce.h"
#include "seed/ctl_impl.h"
#include "transports/transport.h"

#include "check_run.h"
#include "bound.h"

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
	/* every parser is given iters() mutants: 20,000 by default */
	SFS_TEST_BOUND_GE("mutants_per_parser", 20000, iters());
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

/* The signed generations a replica remembers (control/signstate.h):
 * what parses writes back a text that parses to the same. */
START_TEST(signstate)
{
	static const char text[] =
		"seedfs-signed-generations 1\n"
		"llama%20x 0123456789abcdef seed-1 00000000000000aa 3 "
		"1764547200000000001\n"
		"m 0123456789abcdef h.example:2 0000000000000abc 0 5\n";
	long ok = 0;
	for (long i = 0; i < iters(); i++) {
		size_t n;
		char *t = mutate_text(text, &n), *out, *again;
		size_t len, len2;
		struct sfs_signstate *st = NULL, *st2 = NULL;
		int rc = sfs_signstate_parse(t, n, "F", &st, err, sizeof(err));
		ck_assert(rc == 0 || rc == -EINVAL);
		ck_assert(!rc == (st != NULL));
		if (!rc) {
			ok++;
			ck_assert_int_eq(sfs_signstate_text(st, &out, &len), 0);
			ck_assert_int_eq(sfs_signstate_parse(out, len, "F",
							     &st2, err,
							     sizeof(err)),
					 0);
			ck_assert_uint_eq(sfs_signstate_count(st2),
					  sfs_signstate_count(st));
			ck_assert_int_eq(sfs_signstate_text(st2, &again, &len2),
					 0);
			ck_assert_str_eq(again, out);
			free(out);
			free(again);
		}
		sfs_signstate_free(st);
		sfs_signstate_free(st2);
		free(t);
	}
	printf("signstate: %ld of %ld mutants accepted\n", ok, iters());
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

/* ---- what comes over the network ---- */

/* jansson's own count of what it parsed: values (keys included),
 * objects and arrays, depth. */
static void tree_count(json_t *v, size_t d, struct sfs_json_count *c)
{
	const char *k;
	json_t *x;
	size_t i;
	c->values++;
	if (!json_is_object(v) && !json_is_array(v))
		return;
	c->containers++;
	if (++d > c->depth)
		c->depth = d;
	if (json_is_object(v)) {
		json_object_foreach (v, k, x) {
			c->values++;
			tree_count(x, d, c);
		}
	} else {
		json_array_foreach (v, i, x)
			tree_count(x, d, c);
	}
}

static const char *const json_bases[] = {
	"{\"instance\":\"0x1234\",\"models\":[{\"model\":\"m\",\"generation\":"
	"2,\"content\":\"0xabc\",\"served\":[{\"generation\":1,\"expires_in_"
	"ms\":500},{\"generation\":2}]},{\"model\":\"n\",\"generation\":1,"
	"\"content\":\"0x1\",\"served\":[]}]}",
	"{\"version\":7,\"chunk_size\":4096,\"slab\":{\"address\":\"0x10000\","
	"\"key\":\"0x1234\"},\"files\":[[0,-1,-2],[5,1]],\"prefetching\":true}",
	"[\"a\\\\\\\"b\", -1.5e+3, true, false, null, {\"k\\u0041\": [[]], \"\":"
	" {}}, \"\\/\\n\"]",
	"{\"reseeders\":[{\"address\":\"10.0.0.7:41393\"},{\"address\":"
	"\"[fe80::1]:80\"}]}",
	"{\"reseeders\":[{\"address\":\"10.0.0.7:4\"}],\"live\":5,\"fleet\":"
	"{\"size\":5,\"index\":3,\"members\":[\"10.0.0.7:4\",\"a:1\","
	"\"[::1]:2\"]}}",
};

/* The scan before every parse counts what jansson builds: for every
 * text jansson takes, the same values, objects and arrays, and depth;
 * and a text over a kind's limits never reaches jansson. */
START_TEST(json_scan)
{
	long ok = 0;
	for (long i = 0; i < iters(); i++) {
		size_t n;
		char *j = mutate_text(
			json_bases[i % SFS_ARRAY_SIZE(json_bases)], &n);
		struct sfs_json_count sc, tc = {0};
		sfs_json_scan(j, n, &sc);
		json_error_t je;
		json_t *o = json_loadb(j, n, JSON_REJECT_DUPLICATES, &je);
		if (o) {
			ok++;
			tree_count(o, 0, &tc);
			ck_assert_msg(sc.values == tc.values &&
					      sc.containers == tc.containers &&
					      sc.depth == tc.depth,
				      "%.*s: scan %zu/%zu/%zu, jansson "
				      "%zu/%zu/%zu",
				      (int)n, j, sc.values, sc.containers,
				      sc.depth, tc.values, tc.containers,
				      tc.depth);
			json_decref(o);
		}
		/* Announcements have the smallest limits. */
		const struct sfs_json_limit *l =
			sfs_json_limit(SFS_JSON_ANNOUNCE);
		int rc = sfs_json_load(SFS_JSON_ANNOUNCE, j, n, 0, &o, err,
				       sizeof(err));
		int over = sc.values > l->values ||
			   sc.containers > l->containers || sc.depth > l->depth;
		ck_assert(rc == 0 || rc == -E2BIG || rc == -EINVAL);
		ck_assert_int_eq(rc == -E2BIG, over);
		ck_assert(!rc == (o != NULL));
		json_decref(o);
		free(j);
	}
	printf("json scan: %ld of %ld mutants parsed, every count the "
	       "same\n",
	       ok, iters());
	ck_assert(ok);
}
END_TEST

/* A manifest of two files of 10000 and 5000 bytes (3 and 2 chunks of
 * 4096), as a replica decodes it. */
static struct sfs_manifest *holdings_manifest(void)
{
	struct sfs_manifest *m = sfs_manifest_new("m", 1), *d;
	uint8_t addr[16] = {1};
	uint32_t r;
	size_t f;
	char *text;
	size_t len;
	ck_assert_int_eq(sfs_manifest_add_endpoint(m, "tcp", "tcp;ofi_rxm",
						   NULL, addr, sizeof(addr)),
			 0);
	ck_assert_int_eq(sfs_manifest_add_region(m, 15000, &r), 0);
	sfs_manifest_set_remote(m, r, 0, 0x1000, 7);
	ck_assert_int_eq(sfs_manifest_add_dir(m, "b"), 0);
	ck_assert_int_eq(sfs_manifest_add_file(m, "a", &f), 0);
	ck_assert_int_eq(sfs_manifest_add_remote(m, f, r, 0, 10000), 0);
	m->files[f].has_xxh3 = 1;
	ck_assert_int_eq(sfs_manifest_add_file(m, "b/c", &f), 0);
	ck_assert_int_eq(sfs_manifest_add_remote(m, f, r, 10000, 5000), 0);
	m->files[f].has_xxh3 = 1;
	m->holdings = 1;
	ck_assert_int_eq(sfs_manifest_encode(m, &text, &len), 0);
	sfs_manifest_free(m);
	ck_assert_int_eq(sfs_manifest_decode(text, len, &d, err, sizeof(err)),
			 0);
	free(text);
	return d;
}

START_TEST(holdings)
{
	static const char *const bases[] = {
		"{\"version\":7,\"chunk_size\":4096,\"slab\":{\"address\":"
		"\"0x10000\",\"key\":\"0x1234\"},\"files\":[[0,-1,-2],[5,1]],"
		"\"prefetching\":true}",
		"{\"version\":8,\"chunk_size\":4096,\"slab\":{\"address\":"
		"\"0xffffffffffffd000\",\"raw_key\":\"00112233\"},\"files\":"
		"[[0,1,2],[-2,3]]}",
		/* form 2: runs (slot 0 for chunk 0, then chunk 2 coming) */
		"{\"version\":9,\"base\":5,\"chunk_size\":4096,\"slab\":{"
		"\"address\":\"0x10000\",\"key\":\"0x1234\"},\"runs\":["
		"\"AAQAAQY=\",\"\"]}",
	};
	struct sfs_manifest *m = holdings_manifest();
	long ok = 0, pieces = 0;
	for (long i = 0; i < iters(); i++) {
		size_t n;
		char *j = mutate_text(bases[i % 3], &n);
		json_t *o;
		uint64_t version;
		int rc = model_holdings_load(j, n, &o, &version, err,
					     sizeof(err));
		ck_assert(rc == 0 || rc == -EPROTO);
		ck_assert(!rc == (o != NULL));
		struct sfs_remote slab;
		uint8_t raw[SFS_MF_RAWKEY_MAX];
		struct sfs_cache_hobj *ho;
		struct sfs_cache_piece *pc;
		struct model_slots ms = {0};
		if (!rc)
			rc = model_holdings_pieces(o, m, m, &ms, &slab, raw,
						   &ho, &pc, err, sizeof(err));
		ck_assert(!rc == (ms.s != NULL));
		model_slots_free(&ms);
		ck_assert(rc == 0 || rc == -EPROTO);
		if (!rc) {
			ok++;
			uint64_t chunk = (uint64_t)json_integer_value(
				json_object_get(o, "chunk_size"));
			ck_assert(chunk >= 4096 && !(chunk & (chunk - 1)));
			ck_assert(slab.raw_len <= SFS_MF_RAWKEY_MAX);
			const struct sfs_cache_piece *next = pc;
			for (size_t f = 0; f < m->nfiles; f++) {
				uint64_t size = m->files[f].size, end = 0;
				ck_assert(ho[f].npieces <=
					  (size + chunk - 1) / chunk);
				if (ho[f].npieces)
					ck_assert_ptr_eq(ho[f].pieces, next);
				for (size_t k = 0; k < ho[f].npieces; k++) {
					const struct sfs_cache_piece *p =
						&ho[f].pieces[k];
					ck_assert(p->off % chunk == 0 &&
						  p->off >= end &&
						  p->off < size);
					ck_assert_uint_eq(
						p->len,
						SFS_MIN(chunk, size - p->off));
					end = p->off + p->len;
					if (p->coming) {
						ck_assert_uint_eq(p->raddr, 0);
						continue;
					}
					/* A whole chunk of the slab, in the
					 * address space. */
					ck_assert(p->raddr >= slab.raddr &&
						  (p->raddr - slab.raddr) %
								  chunk ==
							  0 &&
						  p->raddr + chunk - 1 >=
							  p->raddr);
				}
				next += ho[f].npieces;
				pieces += (long)ho[f].npieces;
			}
			free(ho);
			free(pc);
		} else {
			ck_assert(err[0]);
		}
		json_decref(o);
		free(j);
	}
	sfs_manifest_free(m);
	printf("holdings: %ld of %ld mutants accepted (%ld pieces)\n", ok,
	       iters(), pieces);
	ck_assert(ok);
}
END_TEST

#define REG_PREFIX "/seedfs/models/"
#define REG_KEY REG_PREFIX "m/seed/127.0.0.1:7070"
#define REG_VALUE                                                              \
	"{\"version\":1,\"model\":\"m\",\"kind\":\"seed\",\"control\":"        \
	"\"127.0.0.1:7070\",\"generation\":3,\"content\":\"0x1234\","          \
	"\"protocols\":[\"tcp\",\"shm\"],\"identity\":{\"quant\":\"fp8\"}}"

/* What a record the mount keeps must hold. */
static long records_kept;
static void record_ok(const struct frec *f, const struct sfs_reg_event *e)
{
	const char *why;
	ck_assert(f->name[0] && strlen(f->name) <= SFS_MF_NAME_MAX &&
		  !strchr(f->name, '/') && !sfs_path_check(f->name, &why));
	char h[256], p[16];
	ck_assert_int_eq(
		sfs_parse_hostport(f->control, h, sizeof(h), p, sizeof(p)), 0);
	ck_assert(h[0] && p[0]);
	ck_assert(f->reseeder == 0 || f->reseeder == 1);
	if (!e)
		return;
	/* The value says what the key says. */
	json_t *o = json_loadb(e->value, e->vlen, 0, NULL);
	ck_assert_ptr_nonnull(o);
	ck_assert_str_eq(json_string_value(json_object_get(o, "model")),
			 f->name);
	ck_assert_str_eq(json_string_value(json_object_get(o, "control")),
			 f->control);
	ck_assert_str_eq(json_string_value(json_object_get(o, "kind")),
			 f->reseeder ? "reseeder" : "seed");
	json_decref(o);
	records_kept++;
}

static int on_record(void *arg, const struct sfs_reg_event *e)
{
	long *events = arg;
	(*events)++;
	ck_assert(e->type == SFS_REG_PUT || e->type == SFS_REG_DELETE);
	if (e->why)
		return 0;
	ck_assert(e->klen && e->klen <= SFS_REG_KEY_MAX &&
		  strlen(e->key) == e->klen);
	ck_assert(e->vlen <= SFS_REG_VALUE_MAX);
	struct frec f = {0};
	const char *why;
	char buf[160];
	if (fleet_parse_key(REG_PREFIX, e->key, &f, &why))
		return 0;
	record_ok(&f, NULL);
	if (e->type == SFS_REG_PUT &&
	    !fleet_parse_value(e, &f, &why, buf, sizeof(buf)))
		record_ok(&f, e);
	return 0;
}

/* A base64 JSON string of @s, into @out. */
static void b64q(const char *s, char *out)
{
	out[0] = '"';
	sfs_b64_encode(s, strlen(s), out + 1);
	strcat(out, "\"");
}

START_TEST(registry)
{
	char k1[512], v1[1024], k2[512], watch[4096], range[4096];
	b64q(REG_KEY, k1);
	b64q(REG_VALUE, v1);
	b64q(REG_PREFIX "n/reseeder/[fe80::1]:9", k2);
	snprintf(watch, sizeof(watch),
		 "{\"result\":{\"header\":{\"revision\":\"42\"},\"events\":"
		 "[{\"kv\":{\"key\":%s,\"value\":%s,\"mod_revision\":\"41\"}},"
		 "{\"type\":\"DELETE\",\"kv\":{\"key\":%s,\"mod_revision\":"
		 "\"42\"}}]}}",
		 k1, v1, k2);
	snprintf(range, sizeof(range),
		 "{\"header\":{\"revision\":\"9\"},\"kvs\":[{\"key\":%s,"
		 "\"value\":%s,\"mod_revision\":\"8\"},{\"key\":%s,\"value\":"
		 "%s}],\"count\":\"2\"}",
		 k1, v1, k2, v1);
	/* The valid ones keep their record. */
	long events = 0;
	int64_t next = 0, compact, rev;
	int created, canceled;
	ck_assert_int_eq(sfs_reg_parse_watch(watch, strlen(watch), on_record,
					     &events, &next, &created,
					     &canceled, &compact, err,
					     sizeof(err)),
			 0);
	ck_assert_int_eq(events, 2);
	ck_assert_int_eq(records_kept, 1);
	/* One of the three a round, to keep make test's run short. */
	long ok[3] = {0};
	for (long i = 0; i < iters(); i++) {
		size_t n;
		char *j;
		int rc;
		switch (i % 3) {
		case 0:
			j = mutate_text(watch, &n);
			events = 0;
			next = 0;
			rc = sfs_reg_parse_watch(j, n, on_record, &events,
						 &next, &created, &canceled,
						 &compact, err, sizeof(err));
			ck_assert(rc == 0 || rc == -EPROTO || rc == -EIO);
			ok[0] += !rc;
			break;
		case 1:
			j = mutate_text(range, &n);
			events = 0;
			rc = sfs_reg_parse_range(j, n, 2, on_record, &events,
						 &rev, err, sizeof(err));
			ck_assert(rc == 0 || rc == -EPROTO || rc == -E2BIG);
			ck_assert(events <= 2);
			ok[1] += !rc;
			break;
		default: {
			/* A record's value alone. */
			j = mutate_text(REG_VALUE, &n);
			struct sfs_reg_event e = {.type = SFS_REG_PUT,
						  .key = REG_KEY,
						  .klen = strlen(REG_KEY),
						  .value = j,
						  .vlen = n};
			struct frec f = {0};
			const char *why;
			char buf[160];
			ck_assert_int_eq(
				fleet_parse_key(REG_PREFIX, REG_KEY, &f, &why),
				0);
			if (!fleet_parse_value(&e, &f, &why, buf,
					       sizeof(buf))) {
				record_ok(&f, &e);
				ok[2]++;
			} else {
				ck_assert(why && *why);
			}
		}
		}
		free(j);
	}
	printf("registry: %ld watch messages, %ld ranges, %ld record values "
	       "taken of %ld mutants; %ld records kept\n",
	       ok[0], ok[1], ok[2], iters(), records_kept);
	ck_assert(ok[0] && ok[1] && ok[2]);
}
END_TEST

static long sources_seen;
static void on_source(void *arg, const char *addr)
{
	(void)arg;
	char h[256], p[16];
	ck_assert_int_eq(sfs_parse_hostport(addr, h, sizeof(h), p, sizeof(p)),
			 0);
	ck_assert(h[0] && p[0]);
	sources_seen++;
}

/* A seed's "fleet": taken whole when it is one, refused naming the
 * field when not (the re-seeders it lists used all the same). */
START_TEST(sources_fleet)
{
	static const struct {
		const char *fleet;
		const char *err; /* NULL: taken */
	} cases[] = {
		{"{\"size\":5,\"index\":3,\"members\":[\"a:1\",\"b:2\",\"c:3\"]}",
		 NULL},
		{"{\"size\":2,\"index\":1,\"members\":[\"a:1\"]}", NULL},
		{"{\"size\":1,\"index\":0,\"members\":[]}", "fleet.size"},
		{"{\"size\":4097,\"index\":0,\"members\":[\"a:1\",\"a:1\","
		 "\"a:1\",\"a:1\",\"a:1\",\"a:1\",\"a:1\",\"a:1\",\"a:1\","
		 "\"a:1\",\"a:1\",\"a:1\",\"a:1\"]}",
		 "fleet.size: 2 to 4096"},
		{"{\"size\":5,\"index\":5,\"members\":[\"a:1\",\"b:2\",\"c:3\"]}",
		 "fleet.index"},
		{"{\"size\":5,\"index\":-1,\"members\":[\"a:1\",\"b:2\",\"c:3\"]}",
		 "fleet.index"},
		{"{\"size\":5,\"index\":0,\"members\":[\"a:1\",\"b:2\"]}",
		 "fleet.members"},
		{"{\"size\":5,\"index\":0,\"members\":[\"a:1\",\"b:2\",\"c\"]}",
		 "fleet.members"},
		{"{\"size\":5,\"index\":0,\"members\":[\"a:1\",\"b:2\",3]}",
		 "fleet.members"},
	};
	for (size_t i = 0; i < SFS_ARRAY_SIZE(cases); i++) {
		char body[400];
		struct rsrc_fleet fl;
		sources_seen = 0;
		snprintf(body, sizeof(body),
			 "{\"reseeders\":[{\"address\":\"a:1\"}],\"fleet\":%s}",
			 cases[i].fleet);
		int rc = rsrc_parse_sources(body, strlen(body), on_source, NULL,
					    &fl, err, sizeof(err));
		if (!cases[i].err) {
			ck_assert_int_eq(rc, 0);
			ck_assert_int_eq(sources_seen, 1);
			ck_assert_uint_gt(fl.size, 1);
			ck_assert_uint_lt(fl.index, fl.size);
			ck_assert_str_eq(fl.members[0], "a:1");
			continue;
		}
		ck_assert_msg(rc == -EBADMSG && strstr(err, cases[i].err),
			      "case %zu: %d %s", i, rc, err);
		ck_assert_uint_eq(fl.size, 0);
		ck_assert_int_eq(sources_seen, 1); /* the list used */
	}
	/* No fleet: none, and the list is used. */
	const char *plain = "{\"reseeders\":[{\"address\":\"a:1\"}]}";
	struct rsrc_fleet fl;
	fl.size = 9;
	ck_assert_int_eq(rsrc_parse_sources(plain, strlen(plain), on_source,
					    NULL, &fl, err, sizeof(err)),
			 0);
	ck_assert_uint_eq(fl.size, 0);
}
END_TEST

START_TEST(answers)
{
	long ok = 0, sources = 0;
	for (long i = 0; i < iters(); i++) {
		size_t n;
		char *j;
		int rc;
		if (i % 2) { /* a round each */
			struct rsrc_fleet fl;
			j = mutate_text(json_bases[i % 4 == 1 ? 3 : 4], &n);
			rc = rsrc_parse_sources(j, n, on_source, NULL, &fl, err,
						sizeof(err));
			ck_assert(rc == 0 || rc == -E2BIG || rc == -EINVAL ||
				  rc == -EBADMSG);
			/* A fleet taken is one: its place inside it, one
			 * member per power of two below its size. */
			if (!rc && fl.size) {
				size_t want = 0;
				for (size_t d = 1; d < fl.size; d <<= 1)
					want++;
				ck_assert(fl.size >= 2 &&
					  fl.size <= RSRC_FLEET_MAX);
				ck_assert(fl.index < fl.size);
				ck_assert_uint_eq(fl.nmembers, want);
			}
			sources += !rc;
			free(j);
			continue;
		}
		j = mutate_text(json_bases[0], &n);
		struct rsrc_answer a;
		rc = rsrc_parse_models(j, n, &a, err, sizeof(err));
		ck_assert(rc == 0 || rc == -EPROTO || rc == -ENOMEM);
		if (!rc) {
			ok++;
			ck_assert(a.models && a.n <= RMODEL_MAX);
			for (size_t k = 0; k < a.n; k++) {
				const struct rsrc_ans_model *m = &a.models[k];
				const char *why;
				ck_assert(m->name[0] && !strchr(m->name, '/') &&
					  !sfs_path_check(m->name, &why));
				for (size_t q = 0; q < k; q++)
					ck_assert_str_ne(a.models[q].name,
							 m->name);
				ck_assert(m->nserved <= RSERVED_MAX);
				for (size_t q = 0; q < m->nserved; q++)
					ck_assert(m->expires_in[q] >= -1);
			}
			free(a.models);
		} else {
			ck_assert(!a.models && !a.n && err[0]);
		}
		free(j);
	}
	printf("answers: %ld /v1/models and %ld /v1/sources accepted of %ld "
	       "mutants, %ld addresses taken\n",
	       ok, sources, iters(), sources_seen);
	ck_assert(ok && sources_seen);
}
END_TEST

/* @q's argument @name as libmicrohttpd hands it (its first, %XX and +
 * decoded) into @out, or NULL. */
static const char *query_arg(const char *q, const char *name, char *out,
			     size_t len)
{
	size_t nl = strlen(name);
	for (const char *p = q; p && *p;
	     p = strchr(p, '&'), p = p ? p + 1 : p) {
		if (strncmp(p, name, nl) || p[nl] != '=')
			continue;
		size_t o = 0;
		for (const char *c = p + nl + 1; *c && *c != '&' && o + 1 < len;
		     c++) {
			if (*c == '%' && sfs_hex_val(c[1]) >= 0 &&
			    sfs_hex_val(c[2]) >= 0) {
				out[o++] = (char)(sfs_hex_val(c[1]) * 16 +
						  sfs_hex_val(c[2]));
				c += 2;
			} else {
				out[o++] = *c == '+' ? ' ' : *c;
			}
		}
		out[o] = '\0';
		return out;
	}
	return NULL;
}

START_TEST(seed_requests)
{
	static const char *const queries[] = {
		"replica=00000000deadbeef&protocol=tcp&read_bytes=1048576",
		"replica=1&protocol=shm&read_bytes=0",
		"protocol=sockets&read_bytes=18446744073709551615&replica="
		"ffffffffffffffff",
	};
	/* The fourth: a run (the SHA-256 of 32 zero bytes begins
	 * 66687aadf862bd77) and its proof. */
	static const char *const bodies[] = {
		"{\"address\": \"10.1.2.3:41393\"}",
		"{\"address\": \"0.0.0.0:8080\"}",
		"{\"address\":\":9\"}",
		"{\"address\": \"[fe80::5]:7\", \"instance\": "
		"\"0x66687aadf862bd77\", \"proof\": "
		"\"0000000000000000000000000000000000000000000000000000000000"
		"000000\"}",
	};
	static const char *const clients[] = {"10.1.2.3", "fe80::5"};
	struct ctl_reports *rp = calloc(1, sizeof(*rp));
	struct sfs_announced *tab;
	uint64_t before[CTL_PROTOS_MAX] = {0}, now = 1000;
	long counted = 0, announced = 0, listed = 0;
	ck_assert_int_eq(sfs_announced_new(NULL, &tab), 0);
	for (long i = 0; i < iters(); i++, now += 7) {
		size_t n;
		if (i % 2) { /* a round each */
			char *b = mutate_text(bodies[i / 2 % 4], &n);
			char h[256], p[16];
			struct ctl_announce an;
			struct sfs_announced_res res;
			int rc =
				ctl_parse_announce(b, n, &an, err, sizeof(err));
			ck_assert(rc == 0 || rc == -EINVAL);
			if (rc) {
				ck_assert(err[0]);
				free(b);
				continue;
			}
			ck_assert_int_eq(sfs_parse_hostport(an.addr, h,
							    sizeof(h), p,
							    sizeof(p)),
					 0);
			announced++;
			/* What the table makes of it: listed (at the
			 * caller's address), or one of its refusals. */
			struct sfs_announce in = {
				.addr = an.addr,
				.caller = clients[i / 2 % 4 == 3],
				.instance = an.instance,
				.proof = an.has_proof ? an.proof : NULL};
			rc = sfs_announced_add(tab, &in, now, &res);
			ck_assert(rc == 0 || rc == -EINVAL || rc == -EPERM ||
				  rc == -EACCES || rc == -EDQUOT);
			if (!rc) {
				ck_assert_int_eq(
					sfs_parse_hostport(res.listed, h,
							   sizeof(h), p,
							   sizeof(p)),
					0);
				ck_assert_str_eq(h, in.caller);
				listed++;
			}
			free(b);
			continue;
		}
		char *q = mutate_text(queries[i / 2 % 3], &n), a[3][64];
		int rc = ctl_note_report(
			rp, query_arg(q, "replica", a[0], sizeof(a[0])),
			query_arg(q, "protocol", a[1], sizeof(a[1])),
			query_arg(q, "read_bytes", a[2], sizeof(a[2])), now);
		ck_assert(rc == 0 || rc == -EINVAL || rc == -ENOSPC);
		counted += !rc;
		ck_assert(rp->nreplicas <= CTL_REPLICAS_MAX &&
			  rp->nprotos <= CTL_PROTOS_MAX);
		for (size_t p = 0; p < rp->nprotos; p++) {
			ck_assert(sfs_xport_known(rp->protos[p], NULL, 0));
			/* Counters never go back. */
			ck_assert(rp->read_bytes[p] >= before[p]);
			before[p] = rp->read_bytes[p];
		}
		free(q);
	}
	printf("seed: %ld read reports counted (%zu replicas, %zu "
	       "protocols), %ld announcements parsed, %ld listed, of %ld "
	       "mutants\n",
	       counted, rp->nreplicas, rp->nprotos, announced, listed, iters());
	ck_assert(counted && announced && listed);
	sfs_announced_free(tab);
	free(rp);
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
	tcase_add_test(t, json_scan);
	tcase_add_test(t, holdings);
	tcase_add_test(t, registry);
	tcase_add_test(t, answers);
	tcase_add_test(t, sources_fleet);
	tcase_add_test(t, seed_requests);
	tcase_add_test(t, signstate);
	suite_add_tcase(s, t);
	return sfs_check_run(s);
}
