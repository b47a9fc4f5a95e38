/* SPDX-License-Identifier: MIT */
/* Unit tests: source identity and --require (metadata/identity). */
#include "metadata/identity.h"

#include "check_run.h"

#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

static char err[512];

START_TEST(defaults_and_canonical)
{
	struct sfs_identity id;
	char *c, sid[13];
	sfs_identity_init(&id, "llama", 3);
	ck_assert_int_eq(sfs_identity_check(&id, err, sizeof(err)), 0);
	ck_assert_int_eq(sfs_identity_canonical(&id, &c), 0);
	/* Sorted keys, no blanks, every key present. */
	ck_assert_str_eq(c, "{\"dtype\":\"\",\"ep_rank\":0,\"ep_size\":1,"
			    "\"framework\":\"none\",\"generation\":3,"
			    "\"layout\":\"checkpoint\",\"layout_version\":0,"
			    "\"model\":\"llama\",\"pp_rank\":0,\"pp_size\":1,"
			    "\"quant\":\"none\",\"quant_params\":{},"
			    "\"revision\":\"\",\"tp_rank\":0,\"tp_size\":1}");
	free(c);
	ck_assert_int_eq(sfs_identity_short_id(&id, sid), 0);
	ck_assert_uint_eq(strlen(sid), 12);
	ck_assert_uint_eq(strspn(sid, "0123456789abcdef"), 12);
	/* Any field changes the id; parameters are canonicalised. */
	struct sfs_identity b;
	char sid2[13], sid3[13];
	sfs_identity_init(&b, "llama", 3);
	ck_assert_int_eq(sfs_identity_set(&b, "tp_rank", "0", err, sizeof(err)),
			 0);
	ck_assert_int_eq(sfs_identity_short_id(&b, sid2), 0);
	ck_assert_str_eq(sid, sid2);
	ck_assert_int_eq(
		sfs_identity_set_params(&b, "{ \"b\": 1, \"a\": [128, 128] }",
					err, sizeof(err)),
		0);
	ck_assert_str_eq(b.quant_params, "{\"a\":[128,128],\"b\":1}");
	ck_assert_int_eq(sfs_identity_short_id(&b, sid3), 0);
	ck_assert_str_ne(sid, sid3);
	sfs_identity_clear(&b);
	sfs_identity_clear(&id);
}
END_TEST

START_TEST(set_and_check)
{
	struct sfs_identity id;
	sfs_identity_init(&id, "m", 1);
	ck_assert_int_eq(
		sfs_identity_set(&id, "quant", "fp8", err, sizeof(err)), 0);
	ck_assert_int_eq(
		sfs_identity_set(&id, "tp_size", "8", err, sizeof(err)), 0);
	ck_assert_int_eq(
		sfs_identity_set(&id, "tp_rank", "7", err, sizeof(err)), 0);
	ck_assert_int_eq(sfs_identity_check(&id, err, sizeof(err)), 0);
	ck_assert_int_eq(
		sfs_identity_set(&id, "tp_rank", "8", err, sizeof(err)), 0);
	ck_assert_int_eq(sfs_identity_check(&id, err, sizeof(err)), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "identity.tp_rank: 8 is not below "
					  "tp_size 8"));
	ck_assert_int_eq(
		sfs_identity_set(&id, "tp_rank", "-1", err, sizeof(err)),
		-EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "tp_rank"));
	ck_assert_int_eq(
		sfs_identity_set(&id, "colour", "red", err, sizeof(err)),
		-EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "unknown identity key 'colour'"));
	ck_assert_int_eq(
		sfs_identity_set(&id, "framework", "a b", err, sizeof(err)),
		-EINVAL);
	ck_assert_int_eq(
		sfs_identity_set(&id, "tp_rank", "0", err, sizeof(err)), 0);
	ck_assert_int_eq(
		sfs_identity_set(&id, "layout", "processed", err, sizeof(err)),
		0);
	ck_assert_int_eq(sfs_identity_check(&id, err, sizeof(err)), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "identity.layout_version"));
	ck_assert_int_eq(
		sfs_identity_set(&id, "layout", "weird", err, sizeof(err)), 0);
	ck_assert_int_eq(sfs_identity_check(&id, err, sizeof(err)), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "identity.layout"));
	ck_assert_int_eq(sfs_identity_set_params(&id, "[1]", err, sizeof(err)),
			 -EINVAL);
	ck_assert_int_eq(sfs_identity_set_params(&id, "{", err, sizeof(err)),
			 -EINVAL);
	sfs_identity_clear(&id);
}
END_TEST

static void reject_json(const char *json, const char *needle)
{
	struct sfs_identity id;
	sfs_identity_init(&id, "m", 1);
	err[0] = '\0';
	ck_assert_int_eq(sfs_identity_from_json(&id, json, strlen(json), err,
						sizeof(err)),
			 -EINVAL);
	ck_assert_msg(strstr(err, needle), "'%s' lacks '%s'", err, needle);
	sfs_identity_clear(&id);
}

START_TEST(from_json)
{
	struct sfs_identity id, back;
	char *c;
	sfs_identity_init(&id, "m", 2);
	ck_assert_int_eq(
		sfs_identity_set(&id, "quant", "awq", err, sizeof(err)), 0);
	ck_assert_int_eq(
		sfs_identity_set_params(&id, "{\"bits\":4}", err, sizeof(err)),
		0);
	ck_assert_int_eq(sfs_identity_canonical(&id, &c), 0);
	sfs_identity_init(&back, "", 0);
	ck_assert_int_eq(
		sfs_identity_from_json(&back, c, strlen(c), err, sizeof(err)),
		0);
	ck_assert_str_eq(back.quant, "awq");
	ck_assert_str_eq(back.model, "m");
	ck_assert_uint_eq(back.generation, 2);
	ck_assert_str_eq(back.quant_params, "{\"bits\":4}");
	free(c);
	sfs_identity_clear(&id);
	sfs_identity_clear(&back);
	reject_json("[]", "identity: not an object");
	reject_json("{\"model\":\"m\",\"tp_size\":\"4\"}", "identity.tp_size");
	reject_json("{\"model\":\"m\",\"tp_size\":-4}", "identity.tp_size");
	reject_json("{\"model\":\"m\",\"quant\":7}", "identity.quant");
	reject_json("{\"model\":\"m\",\"quant\":\"a\\\"b\"}", "identity.quant");
	reject_json("{\"model\":\"m\",\"colour\":\"red\"}",
		    "identity.colour: unknown key");
	reject_json("{\"model\":\"m\",\"quant_params\":[]}",
		    "identity.quant_params");
	reject_json("{\"model\":\"m\",\"tp_size\":2,\"tp_rank\":2}",
		    "identity.tp_rank");
	reject_json("{\"model\":\"\"}", "identity.model");
	/* A model is named like a manifest's model: up to 255 bytes of
	 * UTF-8 (85 three-byte characters), no '/', no control bytes. */
	char j[400], name[256] = "";
	for (int i = 0; i < 85; i++)
		strcat(name, "\xe6\xa8\xa1");
	snprintf(j, sizeof(j), "{\"model\":\"%s\"}", name);
	ck_assert_int_eq(
		sfs_identity_from_json(&back, j, strlen(j), err, sizeof(err)),
		0);
	ck_assert_str_eq(back.model, name);
	sfs_identity_clear(&back);
	snprintf(j, sizeof(j), "{\"model\":\"%sa\"}", name);
	reject_json(j, "identity.model: not a string of 0-255 bytes");
	reject_json("{\"model\":\"a/b\"}", "identity.model");
	reject_json("{\"model\":\"a\\nb\"}", "identity.model");
	ck_assert_int_eq(sfs_identity_set(&id, "model", name, err, sizeof(err)),
			 0);
	ck_assert_str_eq(id.model, name);
	ck_assert_int_eq(sfs_identity_set(&id, "quant", "\xe6\xa8\xa1", err,
					  sizeof(err)),
			 -EINVAL);
	sfs_identity_clear(&id);
}
END_TEST

START_TEST(require)
{
	struct sfs_require *r;
	struct sfs_identity id;
	char why[256];
	sfs_identity_init(&id, "m", 1);
	ck_assert_int_eq(
		sfs_identity_set(&id, "quant", "fp8", err, sizeof(err)), 0);
	ck_assert_int_eq(
		sfs_identity_set(&id, "tp_size", "4", err, sizeof(err)), 0);
	ck_assert_int_eq(
		sfs_identity_set(&id, "tp_rank", "3", err, sizeof(err)), 0);
	ck_assert_int_eq(sfs_require_parse("quant=fp8,layout=checkpoint,"
					   "tp_rank=3",
					   &r, err, sizeof(err)),
			 0);
	ck_assert_int_eq(sfs_require_match(r, &id, why, sizeof(why)), 1);
	ck_assert_str_eq(sfs_require_value(r, "layout"), "checkpoint");
	ck_assert_ptr_null(sfs_require_value(r, "dtype"));
	sfs_require_free(r);
	ck_assert_int_eq(sfs_require_parse("quant=awq", &r, err, sizeof(err)),
			 0);
	ck_assert_int_eq(sfs_require_match(r, &id, why, sizeof(why)), 0);
	ck_assert_str_eq(why, "quant is 'fp8', required 'awq'");
	sfs_require_free(r);
	ck_assert_int_eq(sfs_require_parse("tp_rank=03", &r, err, sizeof(err)),
			 0);
	ck_assert_int_eq(sfs_require_match(r, &id, why, sizeof(why)), 1);
	sfs_require_free(r);
	ck_assert_int_eq(sfs_require_parse("tp_rank=2", &r, err, sizeof(err)),
			 0);
	ck_assert_int_eq(sfs_require_match(r, &id, why, sizeof(why)), 0);
	ck_assert_str_eq(why, "tp_rank is 3, required 2");
	sfs_require_free(r);
	ck_assert_int_eq(sfs_require_match(NULL, &id, why, sizeof(why)), 1);

	static const char *const bad[][2] = {
		{"qaunt=fp8", "unknown key 'qaunt'"},
		{"quant", "'quant' is not key=value"},
		{"quant=", "'quant=' is not key=value"},
		{"=fp8", "'=fp8' is not key=value"},
		{"tp_rank=x", "tp_rank=x is not a non-negative integer"},
		{"tp_rank=-1", "tp_rank=-1 is not a non-negative integer"},
		{"quant=a,quant=b", "quant given twice"},
		{",", "--require: empty"},
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		r = NULL;
		err[0] = '\0';
		ck_assert_int_eq(
			sfs_require_parse(bad[i][0], &r, err, sizeof(err)),
			-EINVAL);
		ck_assert_ptr_null(r);
		ck_assert_msg(strstr(err, bad[i][1]), "%s: '%s' lacks '%s'",
			      bad[i][0], err, bad[i][1]);
	}
	sfs_identity_clear(&id);
	ck_assert_int_eq(sfs_layout_is("processed", "processed"), 1);
	ck_assert_int_eq(sfs_layout_is("processed:fp8", "processed"), 1);
	ck_assert_int_eq(sfs_layout_is("processedx", "processed"), 0);
	ck_assert_int_eq(sfs_layout_is("checkpoint", "processed"), 0);
	ck_assert_int_eq(sfs_layout_is(":x", "checkpoint"), 0);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("identity");
	TCase *t = tcase_create("identity");
	tcase_add_test(t, defaults_and_canonical);
	tcase_add_test(t, set_and_check);
	tcase_add_test(t, from_json);
	tcase_add_test(t, require);
	suite_add_tcase(s, t);
	return sfs_check_run(s);
}
