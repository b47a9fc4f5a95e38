/* SPDX-License-Identifier: MIT */
/*
 * progress.h - progress of a long copy on stderr: a bar redrawn in place
 * on a terminal ("[#####.....]  45%  1.2/2.7 GiB  850 MB/s  ETA 2s"),
 * plain lines every few seconds otherwise.  Not thread safe: one owner.
 */
#ifndef SFS_PROGRESS_H
#define SFS_PROGRESS_H

#include <stdint.h>

struct sfs_progress {
	const char *what; /* "pull llama-8b" [borrowed] */
	uint64_t total, done;
	uint64_t t0_ns, last_ns;
	int tty;
};

void sfs_progress_start(struct sfs_progress *p, const char *what,
			uint64_t total);
/* sfs_progress_add - @n more bytes done; redraws when due. */
void sfs_progress_add(struct sfs_progress *p, uint64_t n);
/* sfs_progress_end - the final line: bytes, seconds, average rate. */
void sfs_progress_end(struct sfs_progress *p, int ok);

#endif /* SFS_PROGRESS_H */
