/* SPDX-License-Identifier: MIT */
/* Unit tests: tensor names as file names (metadata/tname). */
#include "metadata/tname.h"

#include "check_run.h"

#include <check.h>
#include <errno.h>
#include <string.h>

static void round_trip(const char *name, const char *want)
{
	char esc[256], back[4097];
	ck_assert_int_eq(sfs_tname_escape(name, 5, esc, sizeof(esc)), 0);
	ck_assert_str_eq(esc, want);
	ck_assert_ptr_null(strchr(esc, '/'));
	ck_assert_int_eq(sfs_tname_unescape(esc, back, sizeof(back)), 0);
	ck_assert_str_eq(back, name);
}

START_TEST(escapes)
{
	round_trip("model.layers.0.weight", "model.layers.0.weight");
	round_trip("a/b/c", "a%2Fb%2Fc");
	round_trip("100%", "100%25");
	round_trip("%2F", "%252F");
	round_trip(".", "%2E");
	round_trip("..", "%2E.");
	round_trip(".hidden", "%2Ehidden");
	round_trip("x.json", "x%2Ejson");
	round_trip(".json", "%2Ejson");
	round_trip("x.json.y", "x.json.y");
	round_trip("tab\there\n", "tab%09here%0A");
	round_trip("del\x7f", "del%7F");
	round_trip("\xc3\xbcn\xc3\xaf", "\xc3\xbcn\xc3\xaf"); /* UTF-8 stays */
}
END_TEST

START_TEST(limits)
{
	char esc[256], big[300], back[8];
	ck_assert_int_eq(sfs_tname_escape("", 0, esc, sizeof(esc)), -EINVAL);
	/* 250 bytes + ".json" is 255: fits; one more does not. */
	memset(big, 'a', 250);
	big[250] = '\0';
	ck_assert_int_eq(sfs_tname_escape(big, 5, esc, sizeof(esc)), 0);
	ck_assert_uint_eq(strlen(esc), 250);
	big[250] = 'a';
	big[251] = '\0';
	ck_assert_int_eq(sfs_tname_escape(big, 5, esc, sizeof(esc)),
			 -ENAMETOOLONG);
	/* An escape counts three bytes. */
	memset(big, '/', 84);
	big[84] = '\0';
	ck_assert_int_eq(sfs_tname_escape(big, 5, esc, sizeof(esc)),
			 -ENAMETOOLONG);
	big[83] = '\0';
	ck_assert_int_eq(sfs_tname_escape(big, 5, esc, sizeof(esc)), 0);
	/* Malformed escapes, NUL, a short buffer. */
	ck_assert_int_eq(sfs_tname_unescape("a%", back, sizeof(back)), -EINVAL);
	ck_assert_int_eq(sfs_tname_unescape("a%2", back, sizeof(back)),
			 -EINVAL);
	ck_assert_int_eq(sfs_tname_unescape("a%zz", back, sizeof(back)),
			 -EINVAL);
	ck_assert_int_eq(sfs_tname_unescape("a%00", back, sizeof(back)),
			 -EINVAL);
	ck_assert_int_eq(sfs_tname_unescape("abcdefgh", back, sizeof(back)),
			 -ENAMETOOLONG);
	ck_assert_int_eq(sfs_tname_unescape("a%2fb", back, sizeof(back)), 0);
	ck_assert_str_eq(back, "a/b");
}
END_TEST

int main(void)
{
	Suite *s = suite_create("tname");
	TCase *t = tcase_create("tname");
	tcase_add_test(t, escapes);
	tcase_add_test(t, limits);
	suite_add_tcase(s, t);
	return sfs_check_run(s);
}
