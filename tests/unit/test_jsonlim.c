/* SPDX-License-Identifier: MIT */
/*
 * Unit tests: JSON within bounds (metadata/jsonlim.h): what the scan
 * counts, each limit's one-line refusal, and the parsers that use it
 * refusing a wide, a deep and a container-heavy answer before jansson
 * allocates.
 */
#include "metadata/identity.h"
#include "metadata/jsonlim.h"
#include "metadata/manifest.h"
#include "control/registry.h"
#include "metadata/safetensors.h"

#include "check_run.h"

#include <check.h>
#include <errno.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char err[512];

static void counts(const char *json, size_t values, size_t containers,
		   size_t depth)
{
	struct sfs_json_count c;
	sfs_json_scan(json, strlen(json), &c);
	ck_assert_msg(c.values == values && c.containers == containers &&
			      c.depth == depth,
		      "%s: %zu values, %zu containers, depth %zu; expected "
		      "%zu, %zu, %zu",
		      json, c.values, c.containers, c.depth, values, containers,
		      depth);
}

START_TEST(scan)
{
	counts("", 0, 0, 0);
	counts("{}", 1, 1, 1);
	counts("[[],{}]", 3, 3, 2);
	/* Keys count: { "a" [ 1 2 { "b" "x\"y" } ] "c" true } */
	counts("{\"a\":[1,2,{\"b\":\"x\\\"y\"}],\"c\":true}", 10, 3, 3);
	/* An escaped backslash before the closing quote closes it. */
	counts("[\"a\\\\\",\"b\"]", 3, 1, 1);
	counts("[\"\\\\\\\"]\",1]", 3, 1, 1); /* "\\\"]" is one string */
	/* A string that is an escaped backslash alone: the run at its
	 * start is counted whole (counted one short, the quote that closes
	 * it looked escaped and the structure after it was text). */
	counts("{\"a\":\"\\\\\",\"b\":[[[[[[]]]]]]}", 10, 7, 7);
	counts("[\"\\\\\\\\\",[[]]]", 4, 3, 3); /* "\\\\" then [[]] */
	/* Structure inside a string is text. */
	counts("[\"{[[[,:\"]", 2, 1, 1);
	counts("[-1.5e+10, 2 ,null,false , 3]", 6, 1, 1);
	/* Not JSON, counted all the same: jansson refuses it next. */
	counts("]]]}}[", 1, 1, 1);
	counts("[\"unterminated", 2, 1, 1);
	counts("1 2 3", 3, 0, 0);
	counts("[tru e]", 3, 1, 1);
}
END_TEST

START_TEST(limits_refused_in_one_line)
{
	{
		/* An announcement 101 deep behind an escaped backslash:
		 * refused by its depth (4), not taken for a string. */
		char body[512];
		int n = snprintf(body, sizeof(body),
				 "{\"address\":\"\\\\\",\"x\":");
		for (int i = 0; i < 101; i++)
			body[n++] = '[';
		for (int i = 0; i < 101; i++)
			body[n++] = ']';
		body[n++] = '}';
		body[n] = '\0';
		json_t *o;
		ck_assert_int_eq(sfs_json_load(SFS_JSON_ANNOUNCE, body,
					       (size_t)n, 0, &o, err,
					       sizeof(err)),
				 -E2BIG);
		ck_assert_str_eq(err,
				 "announce: nested 102 deep, more than the 4 "
				 "allowed");
	}
	const struct sfs_json_limit *a = sfs_json_limit(SFS_JSON_ANNOUNCE);
	json_t *o;
	char buf[512];
	ck_assert_str_eq(a->what, "announce");
	ck_assert_uint_eq(a->values, 64);
	ck_assert_uint_eq(a->containers, 8);
	ck_assert_uint_eq(a->depth, 4);
	/* 65 values: [ and 64 zeros. */
	size_t n = 0;
	buf[n++] = '[';
	for (int i = 0; i < 64; i++)
		n += (size_t)snprintf(buf + n, sizeof(buf) - n, "0,");
	buf[n - 1] = ']';
	ck_assert_int_eq(sfs_json_load(SFS_JSON_ANNOUNCE, buf, n, 0, &o, err,
				       sizeof(err)),
			 -E2BIG);
	ck_assert_ptr_null(o);
	ck_assert_str_eq(err, "announce: 65 JSON values, more than the 64 "
			      "allowed");
	/* One zero fewer: in. */
	ck_assert_int_eq(sfs_json_load(SFS_JSON_ANNOUNCE, buf + 2, n - 2, 0, &o,
				       err, sizeof(err)),
			 -EINVAL); /* "0,0,...]" is not JSON */
	ck_assert_msg(!strncmp(err, "announce: not valid JSON: ", 26), "%s",
		      err);
	buf[2] = '[';
	ck_assert_int_eq(sfs_json_load(SFS_JSON_ANNOUNCE, buf + 2, n - 2, 0, &o,
				       err, sizeof(err)),
			 0);
	ck_assert_uint_eq(json_array_size(o), 63);
	json_decref(o);
	const char *nine = "[[],[],[],[],[],[],[],[]]";
	ck_assert_int_eq(sfs_json_load(SFS_JSON_ANNOUNCE, nine, strlen(nine), 0,
				       &o, err, sizeof(err)),
			 -E2BIG);
	ck_assert_str_eq(err, "announce: 9 JSON objects and arrays, more than "
			      "the 8 allowed");
	const char *deep = "{\"a\":[[[[]]]]}";
	ck_assert_int_eq(sfs_json_load(SFS_JSON_ANNOUNCE, deep, strlen(deep), 0,
				       &o, err, sizeof(err)),
			 -E2BIG);
	ck_assert_str_eq(err, "announce: nested 5 deep, more than the 4 "
			      "allowed");
	ck_assert_int_eq(sfs_json_load(SFS_JSON_ANNOUNCE, deep + 5, 8, 0, &o,
				       err, sizeof(err)),
			 0);
	json_decref(o);
}
END_TEST

/* "[" + @n repeats of @item joined by "," + "]" [new]; *len. */
static char *repeat(const char *item, size_t n, size_t *len)
{
	size_t il = strlen(item), l = 2 + n * il + (n ? n - 1 : 0);
	char *b = malloc(l + 1), *p = b;
	*p++ = '[';
	for (size_t i = 0; i < n; i++) {
		memcpy(p, item, il);
		p += il;
		if (i + 1 < n)
			*p++ = ',';
	}
	*p++ = ']';
	*p = '\0';
	*len = l;
	return b;
}

/* Heap in use now (what jansson would keep of a parse). */
static size_t heap(void)
{
	return mallinfo2().uordblks;
}

START_TEST(manifest_wide_deep_objects)
{
	const struct sfs_json_limit *l = sfs_json_limit(SFS_JSON_MANIFEST);
	struct sfs_manifest *m = NULL;
	size_t len;
	char want[200];

	/* Wide: one value over the cap, 40 MB of "0," (jansson would take
	 * some 900 MB for it). */
	char *b = repeat("0", l->values, &len);
	size_t h0 = heap();
	ck_assert_int_eq(sfs_manifest_decode(b, len, &m, err, sizeof(err)),
			 -EINVAL);
	ck_assert_ptr_null(m);
	ck_assert_uint_le(heap(), h0 + 4096);
	snprintf(want, sizeof(want),
		 "manifest: %zu JSON values, more than the %zu allowed",
		 l->values + 1, l->values);
	ck_assert_str_eq(err, want);
	free(b);

	/* Objects: cheap in bytes, 224 bytes each in jansson. */
	b = repeat("{}", l->containers, &len);
	ck_assert_int_eq(sfs_manifest_decode(b, len, &m, err, sizeof(err)),
			 -EINVAL);
	snprintf(want, sizeof(want),
		 "manifest: %zu JSON objects and arrays, more than the %zu "
		 "allowed",
		 l->containers + 1, l->containers);
	ck_assert_str_eq(err, want);
	free(b);

	/* Deep: a million arrays. */
	len = 1000000;
	b = malloc(len);
	memset(b, '[', len);
	ck_assert_int_eq(sfs_manifest_decode(b, len, &m, err, sizeof(err)),
			 -EINVAL);
	snprintf(want, sizeof(want),
		 "manifest: nested 1000000 deep, more than the %zu allowed",
		 l->depth);
	ck_assert_str_eq(err, want);
	free(b);
}
END_TEST

START_TEST(other_parsers)
{
	size_t len;
	struct sfs_identity id;
	char want[200];

	/* An identity's quant_params (from a manifest or config.json). */
	const struct sfs_json_limit *l = sfs_json_limit(SFS_JSON_IDENTITY);
	char *arr = repeat("1", l->values, &len);
	char *b = malloc(len + 32);
	len = (size_t)snprintf(b, len + 32, "{\"quant_params\":{\"g\":%s}}",
			       arr);
	free(arr);
	sfs_identity_init(&id, "m", 1);
	ck_assert_int_eq(sfs_identity_from_json(&id, b, len, err, sizeof(err)),
			 -EINVAL);
	snprintf(want, sizeof(want),
		 "identity: %zu JSON values, more than the %zu allowed",
		 l->values + 5, l->values);
	ck_assert_str_eq(err, want);
	sfs_identity_clear(&id);
	free(b);

	/* A safetensors header of a million nested objects. */
	len = 1000000;
	b = malloc(len);
	memset(b, '[', len);
	b[0] = '{';
	struct sfs_st_header *h;
	ck_assert_int_eq(sfs_st_parse(b, len, len + 8, &h, err, sizeof(err)),
			 -EINVAL);
	ck_assert_str_eq(err, "safetensors header: nested 1000000 deep, more "
			      "than the 16 allowed");
	free(b);

	/* An etcd watch message. */
	l = sfs_json_limit(SFS_JSON_REG_WATCH);
	b = repeat("{}", l->containers, &len);
	int64_t next = 0, compact;
	int created, canceled;
	ck_assert_int_eq(sfs_reg_parse_watch(b, len, NULL, NULL, &next,
					     &created, &canceled, &compact, err,
					     sizeof(err)),
			 -EPROTO);
	snprintf(want, sizeof(want),
		 "etcd watch message: %zu JSON objects and arrays, more than "
		 "the %zu allowed",
		 l->containers + 1, l->containers);
	ck_assert_str_eq(err, want);
	free(b);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("jsonlim");
	TCase *t = tcase_create("jsonlim");
	tcase_set_timeout(t, 60);
	tcase_add_test(t, scan);
	tcase_add_test(t, limits_refused_in_one_line);
	tcase_add_test(t, manifest_wide_deep_objects);
	tcase_add_test(t, other_parsers);
	suite_add_tcase(s, t);
	return sfs_check_run(s);
}
