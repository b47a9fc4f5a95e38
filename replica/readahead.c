/* SPDX-License-Identifier: MIT */
#include "replica/readahead.h"

#include "common/util.h"
#include "metadata/manifest.h"

#include <errno.h>
#include <stdlib.h>

void sfs_ra_step(struct sfs_ra *ra, uint64_t off, uint64_t end, uint64_t size,
		 uint64_t min, uint64_t max, uint64_t *a, uint64_t *b)
{
	uint64_t lo = ra->next > SFS_RA_SLACK ? ra->next - SFS_RA_SLACK : 0;
	int seq = off >= lo && off <= ra->next + SFS_RA_SLACK;

	if (seq)
		ra->window = ra->window ? SFS_MIN(ra->window * 2, max) : min;
	else
		ra->window = ra->ahead = 0;
	ra->next = SFS_MAX(ra->next, end);
	*a = *b = 0;
	if (!ra->window)
		return;
	uint64_t target = SFS_MIN(ra->next + ra->window, size);
	uint64_t start = SFS_MAX(ra->next, ra->ahead);
	if (start < target) {
		*a = start;
		*b = target;
		ra->ahead = target;
	}
}

/* One tensor's bytes in its file. */
struct ra_span {
	size_t file;
	uint64_t off, end;
};

struct sfs_ra_tensors {
	size_t nfiles;
	size_t *first; /* file i's spans: [first[i], first[i + 1]) */
	struct ra_span *span;
};

static int by_place(const void *x_, const void *y_)
{
	const struct ra_span *x = x_, *y = y_;
	if (x->file != y->file)
		return x->file < y->file ? -1 : 1;
	return x->off < y->off ? -1 : x->off > y->off;
}

int sfs_ra_tensors_new(const struct sfs_manifest *m,
		       struct sfs_ra_tensors **out)
{
	struct sfs_ra_tensors *t = calloc(1, sizeof(*t));
	size_t n = 0;
	*out = NULL;
	if (!t || !(t->first = calloc(m->nfiles + 1, sizeof(*t->first))) ||
	    !(t->span = calloc(m->ntensors ? m->ntensors : 1,
			       sizeof(*t->span)))) {
		sfs_ra_tensors_free(t);
		return -ENOMEM;
	}
	t->nfiles = m->nfiles;
	for (size_t i = 0; i < m->ntensors; i++) {
		const struct sfs_mtensor *mt = &m->tensors[i];
		if (mt->file < m->nfiles && mt->len)
			t->span[n++] = (struct ra_span){mt->file, mt->off,
							mt->off + mt->len};
	}
	qsort(t->span, n, sizeof(*t->span), by_place);
	for (size_t i = 0, k = 0; i <= t->nfiles; i++) {
		while (k < n && t->span[k].file < i)
			k++;
		t->first[i] = k;
	}
	*out = t;
	return 0;
}

void sfs_ra_tensors_free(struct sfs_ra_tensors *t)
{
	if (!t)
		return;
	free(t->first);
	free(t->span);
	free(t);
}

uint64_t sfs_ra_tensor_end(const struct sfs_ra_tensors *t, size_t file,
			   uint64_t off)
{
	if (!t || file >= t->nfiles)
		return 0;
	/* The last span of the file that starts at or before @off. */
	size_t lo = t->first[file], hi = t->first[file + 1];
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (t->span[mid].off <= off)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (lo == t->first[file])
		return 0;
	const struct ra_span *s = &t->span[lo - 1];
	return off < s->end ? s->end : 0;
}

uint64_t sfs_ra_tensors_start(const struct sfs_ra_tensors *t, size_t file)
{
	if (!t || file >= t->nfiles || t->first[file] == t->first[file + 1])
		return UINT64_MAX;
	return t->span[t->first[file]].off;
}

void sfs_ra_tensor_step(struct sfs_ra *ra, uint64_t end, uint64_t tend,
			uint64_t max, uint64_t *a, uint64_t *b)
{
	*a = *b = 0;
	if (tend <= end)
		return;
	uint64_t from = end, to = SFS_MIN(tend, end + max);
	if (from >= ra->t_lo && from <= ra->t_hi)
		from = SFS_MAX(from, ra->t_hi); /* pulled already */
	else
		ra->t_lo = from;
	if (from >= to)
		return;
	ra->t_hi = to;
	*a = from;
	*b = to;
}
