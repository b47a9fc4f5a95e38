/* SPDX-License-Identifier: MIT */
#include "tname.h"

#include "common/util.h"

#include <errno.h>
#include <string.h>

#define TNAME_FILE_MAX 255 /* NAME_MAX */

static int must_escape(const char *name, size_t i, size_t n)
{
	unsigned char c = (unsigned char)name[i];
	if (c == '%' || c == '/' || c < 0x20 || c == 0x7f)
		return 1;
	if (c != '.')
		return 0;
	return i == 0 || (n >= 5 && i == n - 5 && !strcmp(name + i, ".json"));
}

int sfs_tname_escape(const char *name, size_t reserve, char *out, size_t outlen)
{
	static const char hex[] = "0123456789ABCDEF";
	size_t n = strlen(name), o = 0;

	if (n == 0)
		return -EINVAL;
	size_t max = outlen ? outlen - 1 : 0;
	if (max > TNAME_FILE_MAX)
		max = TNAME_FILE_MAX;
	max = reserve < max ? max - reserve : 0;
	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)name[i];
		if (must_escape(name, i, n)) {
			if (o + 3 > max)
				return -ENAMETOOLONG;
			out[o++] = '%';
			out[o++] = hex[c >> 4];
			out[o++] = hex[c & 15];
		} else {
			if (o + 1 > max)
				return -ENAMETOOLONG;
			out[o++] = (char)c;
		}
	}
	out[o] = '\0';
	return 0;
}

int sfs_tname_unescape(const char *in, char *out, size_t outlen)
{
	size_t o = 0;

	for (size_t i = 0; in[i]; i++) {
		int c = (unsigned char)in[i];
		if (c == '%') {
			int h = sfs_hex_val(in[i + 1]);
			int l = h < 0 ? -1 : sfs_hex_val(in[i + 2]);
			if (l < 0 || (h == 0 && l == 0))
				return -EINVAL;
			c = h * 16 + l;
			i += 2;
		}
		if (o + 1 >= outlen)
			return -ENAMETOOLONG;
		out[o++] = (char)c;
	}
	if (!outlen)
		return -ENAMETOOLONG;
	out[o] = '\0';
	return 0;
}
