/* SPDX-License-Identifier: MIT */
/* Unit tests: parsers and codecs in common/util. */
#include "common/mem.h"
#include "common/util.h"

#include "bound.h"
#include "check_run.h"

#include <check.h>
#include <errno.h>
#include <string.h>
#include <sys/stat.h>

START_TEST(hostport)
{
	char h[64], p[8];
	ck_assert_int_eq(
		sfs_parse_hostport("10.0.0.1:7070", h, sizeof(h), p, sizeof(p)),
		0);
	ck_assert_str_eq(h, "10.0.0.1");
	ck_assert_str_eq(p, "7070");
	ck_assert_int_eq(
		sfs_parse_hostport("[::1]:80", h, sizeof(h), p, sizeof(p)), 0);
	ck_assert_str_eq(h, "::1");
	ck_assert_int_eq(sfs_parse_hostport(":0", h, sizeof(h), p, sizeof(p)),
			 0);
	ck_assert_str_eq(h, "");
	ck_assert_str_eq(p, "0");
	ck_assert_int_eq(sfs_parse_hostport("host", h, sizeof(h), p, sizeof(p)),
			 -EINVAL);
	ck_assert_int_eq(
		sfs_parse_hostport("host:", h, sizeof(h), p, sizeof(p)),
		-EINVAL);
	ck_assert_int_eq(
		sfs_parse_hostport("host:65536", h, sizeof(h), p, sizeof(p)),
		-EINVAL);
	ck_assert_int_eq(
		sfs_parse_hostport("::1:80", h, sizeof(h), p, sizeof(p)),
		-EINVAL);
	ck_assert_int_eq(sfs_parse_hostport("h:8x", h, sizeof(h), p, sizeof(p)),
			 -EINVAL);
	/* Nothing a URL reads as a path, a query or a user. */
	static const char *const bad[] = {"evil.example/x?:80", "u@h:80",
					  "h#f:80", "a b:80", "[::1/x]:80"};
	for (size_t i = 0; i < SFS_ARRAY_SIZE(bad); i++)
		ck_assert_int_eq(
			sfs_parse_hostport(bad[i], h, sizeof(h), p, sizeof(p)),
			-EINVAL);
	ck_assert_int_eq(sfs_parse_hostport("seed-1.example_x:80", h, sizeof(h),
					    p, sizeof(p)),
			 0);
	ck_assert_int_eq(sfs_parse_hostport("[fe80::1%eth0]:80", h, sizeof(h),
					    p, sizeof(p)),
			 0);
}
END_TEST

START_TEST(sizes)
{
	uint64_t v;
	ck_assert_int_eq(sfs_parse_size("4096", &v), 0);
	ck_assert_uint_eq(v, 4096);
	ck_assert_int_eq(sfs_parse_size("64K", &v), 0);
	ck_assert_uint_eq(v, 65536);
	ck_assert_int_eq(sfs_parse_size("1MiB", &v), 0);
	ck_assert_uint_eq(v, 1 << 20);
	ck_assert_int_eq(sfs_parse_size("2G", &v), 0);
	ck_assert_uint_eq(v, 2ull << 30);
	ck_assert_int_eq(sfs_parse_size("", &v), -EINVAL);
	ck_assert_int_eq(sfs_parse_size("-1", &v), -EINVAL);
	ck_assert_int_eq(sfs_parse_size("1X", &v), -EINVAL);
	ck_assert_int_eq(sfs_parse_size("99999999999T", &v), -ERANGE);
	ck_assert_int_eq(sfs_parse_u64("0x10", &v), 0);
	ck_assert_uint_eq(v, 16);
	ck_assert_int_eq(sfs_parse_u64("0xffffffffffffffff", &v), 0);
	ck_assert_uint_eq(v, UINT64_MAX);
	ck_assert_int_eq(sfs_parse_u64("0x", &v), -EINVAL);
	ck_assert_int_eq(sfs_parse_u64("12 ", &v), -EINVAL);
	ck_assert_int_eq(sfs_parse_u64("0x1ffffffffffffffff", &v), -ERANGE);
}
END_TEST

START_TEST(base64)
{
	static const char *plain[] = {"",     "f",     "fo",	"foo",
				      "foob", "fooba", "foobar"};
	static const char *enc[] = {"",		"Zg==",	    "Zm8=",    "Zm9v",
				    "Zm9vYg==", "Zm9vYmE=", "Zm9vYmFy"};
	char buf[32];
	size_t n;
	for (size_t i = 0; i < 7; i++) {
		sfs_b64_encode(plain[i], strlen(plain[i]), buf);
		ck_assert_str_eq(buf, enc[i]);
		ck_assert_int_eq(
			sfs_b64_decode(enc[i], strlen(enc[i]), buf, &n), 0);
		ck_assert_uint_eq(n, strlen(plain[i]));
		ck_assert_mem_eq(buf, plain[i], n);
	}
	ck_assert_int_eq(sfs_b64_decode("Zg=", 3, buf, &n), -EINVAL);
	ck_assert_int_eq(sfs_b64_decode("Zh==", 4, buf, &n), -EINVAL);
	ck_assert_int_eq(sfs_b64_decode("Z===", 4, buf, &n), -EINVAL);
	ck_assert_int_eq(sfs_b64_decode("Zg==Zg==", 8, buf, &n), -EINVAL);
	ck_assert_int_eq(sfs_b64_decode("Zm9*", 4, buf, &n), -EINVAL);
}
END_TEST

START_TEST(hex)
{
	uint8_t b[4];
	char s[9];
	size_t n;
	sfs_hex_encode("\x01\xab\xff", 3, s);
	ck_assert_str_eq(s, "01abff");
	ck_assert_int_eq(sfs_hex_decode("01ABff", b, sizeof(b), &n), 0);
	ck_assert_uint_eq(n, 3);
	ck_assert_mem_eq(b, "\x01\xab\xff", 3);
	ck_assert_int_eq(sfs_hex_decode("0", b, sizeof(b), &n), -EINVAL);
	ck_assert_int_eq(sfs_hex_decode("0g", b, sizeof(b), &n), -EINVAL);
	ck_assert_int_eq(sfs_hex_decode("0011223344", b, sizeof(b), &n),
			 -EINVAL);
}
END_TEST

/* The umask as set, and left as it was. */
START_TEST(umask_read)
{
	mode_t old = umask(027);
	ck_assert_uint_eq(sfs_umask(), 027);
	umask(0);
	ck_assert_uint_eq(sfs_umask(), 0);
	umask(0777);
	ck_assert_uint_eq(sfs_umask(), 0777);
	ck_assert_uint_eq(umask(old), 0777);
}
END_TEST

/* Untrusted text as one line: nothing in it can start another. */
START_TEST(escape)
{
	char o[64];
	static const struct {
		const char *in;
		size_t n;
		const char *out;
	} c[] = {
		{"model-7b", 8, "model-7b"},
		{"m\nready\n", 8, "m\\nready\\n"},
		{"a\r\tb\\c", 6, "a\\r\\tb\\\\c"},
		{"\x1b[31mred", 8, "\\x1b[31mred"},
		{"nul\0x", 5, "nul\\x00x"},
		{"del\x7f", 4, "del\\x7f"},
		{"caf\xc3\xa9 \xe6\xa8\xa1\xf0\x9f\x99\x82", 13,
		 "caf\xc3\xa9 \xe6\xa8\xa1\xf0\x9f\x99\x82"},
		{"bad\xff", 4, "bad\\xff"},
		{"cut\xc3", 4, "cut\\xc3"},
		{"over\xc0\xaf", 6, "over\\xc0\\xaf"},
		{"sur\xed\xa0\x80", 6, "sur\\xed\\xa0\\x80"},
		{"big\xf4\x90\x80\x80", 7, "big\\xf4\\x90\\x80\\x80"},
		{"nel\xc2\x85", 5, "nel\\xc2\\x85"},
		{"ls\xe2\x80\xa8", 5, "ls\\xe2\\x80\\xa8"},
		{"", 0, ""},
	};
	for (size_t i = 0; i < sizeof(c) / sizeof(c[0]); i++)
		ck_assert_str_eq(sfs_escape(c[i].in, c[i].n, o, sizeof(o)),
				 c[i].out);
	/* Capped: cut between whole characters, "..." at the end. */
	ck_assert_str_eq(sfs_escape("abcdefgh", 8, o, 9), "abcdefgh");
	ck_assert_str_eq(sfs_escape("abcdefghi", 9, o, 9), "abcde...");
	ck_assert_str_eq(sfs_escape("ab\ncd", 5, o, 7), "ab\\ncd");
	ck_assert_str_eq(sfs_escape("ab\ncd", 5, o, 6), "ab...");
	ck_assert_str_eq(
		sfs_escape("\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9", 8, o, 7),
		"\xc3\xa9...");
	ck_assert_str_eq(sfs_escape("abc", 3, o, 4), "abc");
	ck_assert_str_eq(sfs_escape("abcd", 4, o, 4), "...");
	ck_assert_str_eq(sfs_escape("abc", 3, o, 3), "");
	/* sfs_unprintable: where the first byte sfs_escape would escape
	 * (other than a backslash) is. */
	ck_assert_uint_eq(sfs_unprintable("caf\xc3\xa9 a\\b", 8), 8);
	ck_assert_uint_eq(sfs_unprintable("m\nready", 7), 1);
	ck_assert_uint_eq(sfs_unprintable("ab\xc2\x85", 4), 2);
	ck_assert_uint_eq(sfs_unprintable("abc\xff", 4), 3);
	ck_assert_uint_eq(sfs_unprintable("a\xe2\x80\xa9", 4), 1);
	ck_assert_uint_eq(sfs_unprintable("", 0), 0);
	/* Every byte alone: never a control character or a newline out. */
	for (int b = 0; b < 256; b++) {
		char in = (char)b;
		sfs_escape(&in, 1, o, sizeof(o));
		for (const char *q = o; *q; q++)
			ck_assert_msg((unsigned char)*q >= 0x20 &&
					      (unsigned char)*q != 0x7f,
				      "byte 0x%02x", b);
	}
}
END_TEST

/* The mount's default cache: 1/16 of the RAM within [64 MiB, 4 GiB], at
 * most half of the room, in whole MiB (README, "The mount"). */
/* @b in MiB, or -1 when it is not a whole number of MiB. */
static long long whole_mib(uint64_t b)
{
	return b % (1ull << 20) ? -1 : (long long)(b >> 20);
}

START_TEST(default_cache)
{
	const uint64_t MiB = 1ull << 20, GiB = 1ull << 30;
	struct sfs_mem_room r = {.available = UINT64_MAX};
	SFS_TEST_BOUND_EQ("default_cache_16g_mib", 1024,
			  whole_mib(sfs_mem_default_cache(16 * GiB, &r)));
	ck_assert_uint_eq(sfs_mem_default_cache(24 * GiB, &r), 1536 * MiB);
	SFS_TEST_BOUND_EQ("default_cache_512m_mib", 64,
			  whole_mib(sfs_mem_default_cache(512 * MiB, &r)));
	ck_assert_uint_eq(sfs_mem_default_cache(1088 * MiB, &r), 68 * MiB);
	SFS_TEST_BOUND_EQ("default_cache_256g_mib", 4096,
			  whole_mib(sfs_mem_default_cache(256 * GiB, &r)));
	ck_assert_uint_eq(sfs_mem_default_cache(60 * GiB, &r), 3840 * MiB);
	ck_assert_uint_eq(sfs_mem_default_cache(16 * GiB + 24 * MiB, &r),
			  GiB + MiB); /* 1 GiB + 1.5 MiB, in whole MiB */
	ck_assert_uint_eq(sfs_mem_default_cache(0, &r), 256 * MiB);
	r.available = GiB; /* half of the room */
	SFS_TEST_BOUND_EQ("default_cache_1g_room_mib", 512,
			  whole_mib(sfs_mem_default_cache(16 * GiB, &r)));
	r.available = 100 * MiB; /* never below 64 MiB */
	SFS_TEST_BOUND_EQ("default_cache_100m_room_mib", 64,
			  whole_mib(sfs_mem_default_cache(16 * GiB, &r)));
}
END_TEST

int main(void)
{
	Suite *s = suite_create("util");
	TCase *t = tcase_create("util");
	tcase_add_test(t, hostport);
	tcase_add_test(t, sizes);
	tcase_add_test(t, base64);
	tcase_add_test(t, hex);
	tcase_add_test(t, umask_read);
	tcase_add_test(t, escape);
	tcase_add_test(t, default_cache);
	suite_add_tcase(s, t);
	return sfs_check_run(s);
}
