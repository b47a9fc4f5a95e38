/* SPDX-License-Identifier: MIT */
/* Unit tests: safetensors header validation, one test per rule. */
#include "metadata/safetensors.h"

#include "check_run.h"

#include <check.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

static char err[512];

/* Validate header @json followed by @data_len data bytes. */
static int check_header(const char *json, uint64_t data_len)
{
	size_t n = strlen(json);
	uint64_t size = 8 + n + data_len, got;
	uint8_t *buf = calloc(1, 8 + n);
	struct sfs_st_header *h = NULL;
	int rc;

	for (int i = 0; i < 8; i++)
		buf[i] = (uint8_t)((uint64_t)n >> (8 * i));
	memcpy(buf + 8, json, n);
	err[0] = '\0';
	rc = sfs_st_header_len(buf, size, &got, err, sizeof(err));
	if (!rc)
		rc = sfs_st_parse((char *)buf + 8, got, size, &h, err,
				  sizeof(err));
	sfs_st_free(h);
	free(buf);
	return rc;
}

#define REJECT(json, data_len, needle)                                         \
	do {                                                                   \
		ck_assert_int_eq(check_header(json, data_len), -EINVAL);       \
		ck_assert_msg(strstr(err, needle), "error '%s' lacks '%s'",    \
			      err, needle);                                    \
	} while (0)

START_TEST(valid_header)
{
	ck_assert_int_eq(
		check_header("{\"__metadata__\":{\"format\":\"pt\"},"
			     "\"b\":{\"dtype\":\"F32\",\"shape\":[2,3],"
			     "\"data_offsets\":[8,32]},"
			     "\"a\":{\"dtype\":\"BF16\",\"shape\":[4],"
			     "\"data_offsets\":[0,8]}}",
			     32),
		0);
}
END_TEST

START_TEST(valid_zero_byte_tensor_and_padding)
{
	ck_assert_int_eq(
		check_header("{\"e\":{\"dtype\":\"F16\",\"shape\":[0,7],"
			     "\"data_offsets\":[0,0]},"
			     "\"s\":{\"dtype\":\"U8\",\"shape\":[],"
			     "\"data_offsets\":[0,1]}}    ",
			     1),
		0);
}
END_TEST

START_TEST(valid_no_tensors)
{
	ck_assert_int_eq(check_header("{}", 0), 0);
}
END_TEST

START_TEST(header_parse_result)
{
	const char *j = "{\"w\":{\"dtype\":\"I8\",\"shape\":[3],"
			"\"data_offsets\":[0,3]}}";
	size_t n = strlen(j);
	struct sfs_st_header *h;
	ck_assert_int_eq(sfs_st_parse(j, n, 8 + n + 3, &h, err, sizeof(err)),
			 0);
	ck_assert_uint_eq(h->ntensors, 1);
	ck_assert_uint_eq(h->data_off, 8 + n);
	ck_assert_str_eq(h->tensors[0].name, "w");
	ck_assert_str_eq(h->tensors[0].dtype, "I8");
	ck_assert_uint_eq(h->tensors[0].shape[0], 3);
	sfs_st_free(h);
}
END_TEST

START_TEST(reject_short_file)
{
	uint8_t b[8] = {0};
	uint64_t n;
	ck_assert_int_eq(sfs_st_header_len(b, 7, &n, err, sizeof(err)),
			 -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "too short"));
}
END_TEST

START_TEST(reject_header_over_cap)
{
	uint8_t b[8] = {0};
	uint64_t n, v = SFS_ST_HEADER_MAX + 1ull;
	for (int i = 0; i < 8; i++)
		b[i] = (uint8_t)(v >> (8 * i));
	ck_assert_int_eq(sfs_st_header_len(b, 1ull << 40, &n, err, sizeof(err)),
			 -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "exceeds the cap"));
}
END_TEST

START_TEST(reject_header_past_eof)
{
	uint8_t b[8] = {100};
	uint64_t n;
	ck_assert_int_eq(sfs_st_header_len(b, 50, &n, err, sizeof(err)),
			 -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "past the end"));
}
END_TEST

START_TEST(reject_header_too_short)
{
	uint8_t b[8] = {1};
	uint64_t n;
	ck_assert_int_eq(sfs_st_header_len(b, 50, &n, err, sizeof(err)),
			 -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "too short for a JSON"));
}
END_TEST

START_TEST(reject_not_brace)
{
	REJECT(" {}", 0, "start with '{'");
}
END_TEST

START_TEST(reject_bad_json)
{
	REJECT("{\"a\":", 0, "not valid JSON");
}
END_TEST

START_TEST(reject_duplicate_key)
{
	REJECT("{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]},"
	       "\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[1,2]}}",
	       2, "not valid JSON");
}
END_TEST

START_TEST(reject_entry_not_object)
{
	REJECT("{\"a\":[1]}", 0, "tensor 'a': entry is not an object");
}
END_TEST

START_TEST(reject_missing_dtype)
{
	REJECT("{\"a\":{\"shape\":[1],\"data_offsets\":[0,1]}}", 1,
	       "field 'dtype'");
}
END_TEST

START_TEST(reject_unknown_dtype)
{
	REJECT("{\"a\":{\"dtype\":\"F17\",\"shape\":[1],"
	       "\"data_offsets\":[0,1]}}",
	       1, "unknown dtype 'F17'");
}
END_TEST

START_TEST(reject_missing_shape)
{
	REJECT("{\"a\":{\"dtype\":\"U8\",\"data_offsets\":[0,1]}}", 1,
	       "field 'shape'");
}
END_TEST

START_TEST(reject_negative_dim)
{
	REJECT("{\"a\":{\"dtype\":\"U8\",\"shape\":[-1],"
	       "\"data_offsets\":[0,1]}}",
	       1, "shape[0]");
}
END_TEST

START_TEST(reject_too_many_dims)
{
	REJECT("{\"a\":{\"dtype\":\"U8\",\"shape\":[1,1,1,1,1,1,1,1,1,1,1,1,"
	       "1,1,1,1,1],\"data_offsets\":[0,1]}}",
	       1, "dimensions");
}
END_TEST

START_TEST(reject_bad_offsets)
{
	REJECT("{\"a\":{\"dtype\":\"U8\",\"shape\":[1],"
	       "\"data_offsets\":[0]}}",
	       1, "data_offsets");
}
END_TEST

START_TEST(reject_reversed_offsets)
{
	REJECT("{\"a\":{\"dtype\":\"U8\",\"shape\":[0],"
	       "\"data_offsets\":[1,0]}}",
	       1, "end before they begin");
}
END_TEST

START_TEST(reject_offsets_out_of_bounds)
{
	REJECT("{\"a\":{\"dtype\":\"U8\",\"shape\":[4],"
	       "\"data_offsets\":[0,4]}}",
	       3, "run past the data section");
}
END_TEST

START_TEST(reject_size_mismatch)
{
	REJECT("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],"
	       "\"data_offsets\":[0,4]}}",
	       4, "is 8 bytes but data_offsets span 4");
}
END_TEST

START_TEST(reject_shape_overflow)
{
	REJECT("{\"a\":{\"dtype\":\"F64\",\"shape\":[4294967296,4294967296],"
	       "\"data_offsets\":[0,8]}}",
	       8, "overflows");
}
END_TEST

START_TEST(reject_overlap)
{
	REJECT("{\"a\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]},"
	       "\"b\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[2,6]}}",
	       6, "overlap");
}
END_TEST

START_TEST(reject_gap)
{
	REJECT("{\"a\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[0,2]},"
	       "\"b\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[3,5]}}",
	       5, "gap of 1 bytes before tensor 'b'");
}
END_TEST

START_TEST(reject_trailing_bytes)
{
	REJECT("{\"a\":{\"dtype\":\"U8\",\"shape\":[2],"
	       "\"data_offsets\":[0,2]}}",
	       5, "3 bytes at the end");
}
END_TEST

START_TEST(reject_metadata_not_strings)
{
	REJECT("{\"__metadata__\":{\"k\":1}}", 0, "__metadata__");
	REJECT("{\"__metadata__\":[]}", 0, "__metadata__ is not an object");
}
END_TEST

START_TEST(reject_empty_name)
{
	REJECT("{\"\":{\"dtype\":\"U8\",\"shape\":[1],"
	       "\"data_offsets\":[0,1]}}",
	       1, "tensor name");
}
END_TEST

START_TEST(dtype_sizes)
{
	ck_assert_uint_eq(sfs_dtype_size("BF16"), 2);
	ck_assert_uint_eq(sfs_dtype_size("F8_E4M3"), 1);
	ck_assert_uint_eq(sfs_dtype_size("I64"), 8);
	ck_assert_uint_eq(sfs_dtype_size("bf16"), 0);
	ck_assert_uint_eq(sfs_dtype_size(""), 0);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("safetensors");
	TCase *ok = tcase_create("accept"), *bad = tcase_create("reject");
	tcase_add_test(ok, valid_header);
	tcase_add_test(ok, valid_zero_byte_tensor_and_padding);
	tcase_add_test(ok, valid_no_tensors);
	tcase_add_test(ok, header_parse_result);
	tcase_add_test(ok, dtype_sizes);
	tcase_add_test(bad, reject_short_file);
	tcase_add_test(bad, reject_header_over_cap);
	tcase_add_test(bad, reject_header_past_eof);
	tcase_add_test(bad, reject_header_too_short);
	tcase_add_test(bad, reject_not_brace);
	tcase_add_test(bad, reject_bad_json);
	tcase_add_test(bad, reject_duplicate_key);
	tcase_add_test(bad, reject_entry_not_object);
	tcase_add_test(bad, reject_missing_dtype);
	tcase_add_test(bad, reject_unknown_dtype);
	tcase_add_test(bad, reject_missing_shape);
	tcase_add_test(bad, reject_negative_dim);
	tcase_add_test(bad, reject_too_many_dims);
	tcase_add_test(bad, reject_bad_offsets);
	tcase_add_test(bad, reject_reversed_offsets);
	tcase_add_test(bad, reject_offsets_out_of_bounds);
	tcase_add_test(bad, reject_size_mismatch);
	tcase_add_test(bad, reject_shape_overflow);
	tcase_add_test(bad, reject_overlap);
	tcase_add_test(bad, reject_gap);
	tcase_add_test(bad, reject_trailing_bytes);
	tcase_add_test(bad, reject_metadata_not_strings);
	tcase_add_test(bad, reject_empty_name);
	suite_add_tcase(s, ok);
	suite_add_tcase(s, bad);
	return s;
}

int main(void)
{
	return sfs_check_run(suite());
}
