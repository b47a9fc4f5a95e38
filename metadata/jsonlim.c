/* SPDX-License-Identifier: MIT */
/*
 * jsonlim.c - JSON within bounds (jsonlim.h): a scan that counts before
 * jansson allocates.
 */
#include "metadata/jsonlim.h"

#include "common/util.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

/*
 * The limits, from what a legitimate answer needs (docs/security.md,
 * "Bounded parsing", has the measurements).  Depth: jansson's own
 * ceiling is 2048; ours are a few levels over the deepest a valid
 * answer has.
 */
static const struct sfs_json_limit limits[SFS_JSON_KINDS] = {
	[SFS_JSON_MANIFEST] = {"manifest", 20000000, 2500000, 32},
	[SFS_JSON_HOLDINGS] = {"holdings", 8000000, 1000016, 8},
	[SFS_JSON_MODELS] = {"/v1/models", 65536, 8192, 8},
	[SFS_JSON_SOURCES] = {"/v1/sources", 65536, 8192, 8},
	[SFS_JSON_ANNOUNCE] = {"announce", 64, 8, 4},
	[SFS_JSON_RECORD] = {"registry record", 16384, 4096, 32},
	[SFS_JSON_REG_ANSWER] = {"etcd answer", 1000000, 65536, 16},
	[SFS_JSON_REG_WATCH] = {"etcd watch message", 1000000, 65536, 16},
	[SFS_JSON_IDENTITY] = {"identity", 16384, 4096, 32},
	[SFS_JSON_SAFETENSORS] = {"safetensors header", 16000000, 4000000, 16},
	[SFS_JSON_CONFIG] = {"config.json", 1000000, 262144, 64},
};

const struct sfs_json_limit *sfs_json_limit(enum sfs_json_kind kind)
{
	return &limits[kind < SFS_JSON_KINDS ? kind : SFS_JSON_ANNOUNCE];
}

/* A byte that can be part of a bare token (a number, true, false, null,
 * or what jansson will refuse): anything but structure, quotes and
 * blanks. */
static int token_byte(unsigned char c)
{
	switch (c) {
	case '{':
	case '}':
	case '[':
	case ']':
	case ',':
	case ':':
	case '"':
	case ' ':
	case '\t':
	case '\n':
	case '\r':
		return 0;
	default:
		return 1;
	}
}

/* Past the closing quote of the string whose text starts at @i: the
 * first quote not escaped, i.e. not after an odd run of backslashes. */
static size_t string_end(const unsigned char *p, size_t len, size_t i)
{
	size_t from = i;
	for (;;) {
		const unsigned char *q = memchr(p + i, '"', len - i);
		if (!q)
			return len;
		size_t at = (size_t)(q - p), bs = 0;
		while (at - bs > from && p[at - bs - 1] == '\\')
			bs++;
		i = at + 1;
		if (!(bs & 1))
			return i;
	}
}

void sfs_json_scan(const char *buf, size_t len, struct sfs_json_count *c)
{
	const unsigned char *p = (const unsigned char *)buf;
	size_t n = 0, nc = 0, d = 0, dmax = 0, i = 0;
	int in_token = 0;

	while (i < len) {
		unsigned char b = p[i++];
		switch (b) {
		case '"':
			/* A string (a value or a key): to its closing quote,
			 * an escaped one not closing it. */
			n++;
			i = string_end(p, len, i);
			in_token = 0;
			continue;
		case '{':
		case '[':
			n++;
			nc++;
			if (++d > dmax)
				dmax = d;
			break;
		case '}':
		case ']':
			d -= d > 0;
			break;
		default:
			if (token_byte(b)) {
				n += !in_token;
				in_token = 1;
				continue;
			}
		}
		in_token = 0;
	}
	c->values = n;
	c->containers = nc;
	c->depth = dmax;
}

int sfs_json_load(enum sfs_json_kind kind, const char *buf, size_t len,
		  size_t flags, json_t **out, char *err, size_t errlen)
{
	return sfs_json_load_lim(sfs_json_limit(kind), buf, len, flags, out,
				 err, errlen);
}

int sfs_json_load_lim(const struct sfs_json_limit *lim, const char *buf,
		      size_t len, size_t flags, json_t **out, char *err,
		      size_t errlen)
{
	struct sfs_json_count c;
	json_error_t je;

	*out = NULL;
	sfs_json_scan(buf, len, &c);
	if (c.depth > lim->depth) {
		snprintf(err, errlen,
			 "%s: nested %zu deep, more than the %zu allowed",
			 lim->what, c.depth, lim->depth);
		return -E2BIG;
	}
	if (c.values > lim->values) {
		snprintf(err, errlen,
			 "%s: %zu JSON values, more than the %zu allowed",
			 lim->what, c.values, lim->values);
		return -E2BIG;
	}
	if (c.containers > lim->containers) {
		snprintf(err, errlen,
			 "%s: %zu JSON objects and arrays, more than the %zu "
			 "allowed",
			 lim->what, c.containers, lim->containers);
		return -E2BIG;
	}
	*out = json_loadb(buf, len, flags, &je);
	if (!*out)
		return sfs_fail(err, errlen,
				"%s: not valid JSON: %s (line %d column %d)",
				lim->what, je.text, je.line, je.column);
	return 0;
}
