/* SPDX-License-Identifier: MIT */
/*
 * readahead.h - per open file: is the reader sequential, and how far
 * ahead of it should chunks be pulled?  A window that starts at @min and
 * doubles with every sequential read up to @max; a read elsewhere
 * resets it, so random access causes no large read-ahead.  Reads that
 * arrive slightly out of order (the kernel's own read-ahead runs on
 * several threads) still count as sequential.  Pure logic; the caller
 * locks.
 */
#ifndef SFS_READAHEAD_H
#define SFS_READAHEAD_H

#include <stdint.h>

struct sfs_ra {
	uint64_t next;	 /* end of the furthest read so far */
	uint64_t window; /* 0: not sequential */
	uint64_t ahead;	 /* pulled up to here already */
};

#define SFS_RA_SLACK (8u << 20) /* out-of-order tolerance, bytes */

/*
 * sfs_ra_step - a read of [off, end) of a file of @size bytes arrived;
 * [*a, *b) is what to pull ahead now (empty when *a == *b).
 */
void sfs_ra_step(struct sfs_ra *ra, uint64_t off, uint64_t end, uint64_t size,
		 uint64_t min, uint64_t max, uint64_t *a, uint64_t *b);

#endif /* SFS_READAHEAD_H */
