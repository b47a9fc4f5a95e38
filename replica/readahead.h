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

#include <stddef.h>
#include <stdint.h>

struct sfs_ra {
	uint64_t next;	 /* end of the furthest read so far */
	uint64_t window; /* 0: not sequential */
	uint64_t ahead;	 /* pulled up to here already */
	/* The last range pulled to a tensor's end (sfs_ra_tensor_step). */
	uint64_t t_lo, t_hi;
};

struct sfs_manifest;
struct sfs_ra_tensors;

#define SFS_RA_SLACK (8u << 20) /* out-of-order tolerance, bytes */

/*
 * sfs_ra_step - a read of [off, end) of a file of @size bytes arrived;
 * [*a, *b) is what to pull ahead now (empty when *a == *b).
 */
void sfs_ra_step(struct sfs_ra *ra, uint64_t off, uint64_t end, uint64_t size,
		 uint64_t min, uint64_t max, uint64_t *a, uint64_t *b);

/*
 * sfs_ra_tensors_new - where each file of @m [borrowed for the call]
 * has its tensors, by offset, into *out [new: sfs_ra_tensors_free,
 * which takes NULL]: what a read that lands in a tensor should pull
 * ahead (a loader that reads tensors out of file order, or faults in
 * one page of each, is sequential within each tensor).  0 or -ENOMEM.
 *
 * sfs_ra_tensor_end - the end of the tensor of file @file that holds
 * byte @off, or 0 when none does.  sfs_ra_tensors_start - where the
 * first tensor of file @file starts (UINT64_MAX: it has none): what is
 * before it is the header.  Read only: thread safe.
 *
 * sfs_ra_tensor_step - a read ended at @end, in the tensor that ends at
 * @tend (0: none); [*a, *b) is what to pull ahead now, at most @max
 * past @end and not what the last step pulled (empty when *a == *b).
 */
int sfs_ra_tensors_new(const struct sfs_manifest *m,
		       struct sfs_ra_tensors **out);
void sfs_ra_tensors_free(struct sfs_ra_tensors *t);
uint64_t sfs_ra_tensor_end(const struct sfs_ra_tensors *t, size_t file,
			   uint64_t off);
uint64_t sfs_ra_tensors_start(const struct sfs_ra_tensors *t, size_t file);
void sfs_ra_tensor_step(struct sfs_ra *ra, uint64_t end, uint64_t tend,
			uint64_t max, uint64_t *a, uint64_t *b);

#endif /* SFS_READAHEAD_H */
