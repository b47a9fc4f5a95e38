/* SPDX-License-Identifier: MIT */
#include "replica/readahead.h"

#include "common/util.h"

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
