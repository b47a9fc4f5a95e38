/* SPDX-License-Identifier: MIT */
/*
 * holdruns.c - runs of a re-seeder's holdings (holdruns.h).
 */
#include "metadata/holdruns.h"

#include "common/util.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#define VARINT_MAX 10

struct buf {
	uint8_t *p;
	size_t len, cap;
};

static int put_varint(struct buf *b, uint64_t v)
{
	if (sfs_grow((void **)&b->p, &b->cap, b->len + VARINT_MAX, 1))
		return -ENOMEM;
	do {
		uint8_t byte = v & 0x7f;
		v >>= 7;
		b->p[b->len++] = byte | (v ? 0x80 : 0);
	} while (v);
	return 0;
}

static uint64_t zigzag(int64_t v)
{
	return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
}

static int kind_of(uint32_t s)
{
	return s == SFS_RUNS_NONE ? 1 : s == SFS_RUNS_COMING ? 2 : 0;
}

int sfs_runs_encode(const uint32_t *slots, uint64_t n, int full, char **out)
{
	struct buf b = {0};
	uint64_t end = 0, next_slot = 0;
	int rc = 0;

	*out = NULL;
	for (uint64_t i = 0; i < n && !rc;) {
		uint32_t s = slots[i];
		if (s == SFS_RUNS_SAME || (full && s == SFS_RUNS_NONE)) {
			i++;
			continue;
		}
		int kind = kind_of(s);
		uint64_t k = i + 1;
		while (k < n && (kind ? slots[k] == s
				      : slots[k] < SFS_RUNS_SAME &&
						 slots[k] == s + (k - i)))
			k++;
		rc = put_varint(&b, i - end);
		if (!rc)
			rc = put_varint(&b, (k - i) << 2 | (uint64_t)kind);
		if (!rc && kind == 0) {
			rc = put_varint(
				&b, zigzag((int64_t)s - (int64_t)next_slot));
			next_slot = s + (k - i);
		}
		end = k;
		i = k;
	}
	if (!rc && !(*out = malloc(sfs_b64_enc_len(b.len))))
		rc = -ENOMEM;
	if (!rc)
		sfs_b64_encode(b.p, b.len, *out);
	free(b.p);
	return rc;
}

static int get_varint(const uint8_t *p, size_t len, size_t *at, uint64_t *v)
{
	*v = 0;
	for (unsigned int i = 0; i < VARINT_MAX; i++) {
		if (*at >= len)
			return -1;
		uint8_t byte = p[(*at)++];
		if (i == VARINT_MAX - 1 && byte > 1)
			return -1; /* past 64 bits */
		*v |= (uint64_t)(byte & 0x7f) << (7 * i);
		if (!(byte & 0x80))
			return 0;
	}
	return -1;
}

int sfs_runs_apply(const char *b64, size_t len, uint32_t *slots, uint64_t n,
		   uint64_t slot_max, char *why, size_t whylen)
{
	uint8_t *raw = malloc(len / 4 * 3 + 3);
	size_t rlen, at = 0;
	uint64_t pos = 0, next_slot = 0;
	int rc = 0;

	if (slot_max > SFS_RUNS_SAME)
		slot_max = SFS_RUNS_SAME; /* the codes are no slots */
	if (!raw) {
		snprintf(why, whylen, "runs: out of memory");
		return -ENOMEM;
	}
	if (sfs_b64_decode(b64, len, raw, &rlen)) {
		snprintf(why, whylen, "runs: not base64");
		free(raw);
		return -EPROTO;
	}
	while (at < rlen && !rc) {
		uint64_t gap, head, zz = 0;
		if (get_varint(raw, rlen, &at, &gap) ||
		    get_varint(raw, rlen, &at, &head) ||
		    ((head & 3) == 0 && get_varint(raw, rlen, &at, &zz))) {
			snprintf(why, whylen,
				 "runs: a varint cut short or past 64 bits "
				 "at byte %zu",
				 at);
			rc = -EPROTO;
			break;
		}
		uint64_t count = head >> 2, kind = head & 3;
		if (kind == 3 || !count || gap > n - pos ||
		    count > n - pos - gap) {
			snprintf(why, whylen,
				 "runs: a run of %" PRIu64 " (kind %" PRIu64
				 ") after %" PRIu64 " past the file's %" PRIu64
				 " chunks",
				 count, kind, pos + gap, n);
			rc = -EPROTO;
			break;
		}
		pos += gap;
		if (kind == 0) {
			/* zigzag back: the first slot, relative (next_slot
			 * <= slot_max always) */
			uint64_t mag = zz >> 1, first = 0;
			int bad = (zz & 1) ? mag >= next_slot
					   : mag >= slot_max - next_slot;
			if (!bad)
				first = (zz & 1) ? next_slot - mag - 1
						 : next_slot + mag;
			if (bad || count > slot_max - first) {
				snprintf(why, whylen,
					 "runs: slots %s%" PRIu64
					 " from slot %" PRIu64 " (+%" PRIu64
					 ") outside the slab's %" PRIu64,
					 (zz & 1) ? "-" : "+",
					 (zz & 1) ? mag + 1 : mag, next_slot,
					 count, slot_max);
				rc = -EPROTO;
				break;
			}
			for (uint64_t k = 0; k < count; k++)
				slots[pos + k] = (uint32_t)(first + k);
			next_slot = first + count;
		} else {
			uint32_t v =
				kind == 1 ? SFS_RUNS_NONE : SFS_RUNS_COMING;
			for (uint64_t k = 0; k < count; k++)
				slots[pos + k] = v;
		}
		pos += count;
	}
	free(raw);
	return rc;
}
