/* SPDX-License-Identifier: MIT */
/*
 * pull_impl.h - what pull.c and pull_update.c share: one pull's state
 * and the copy of a file through the cache.
 */
#ifndef SFS_PULL_IMPL_H
#define SFS_PULL_IMPL_H

#include "common/progress.h"
#include "replica/pull.h"

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct sfs_manifest;
struct sfs_rfile;
struct sfs_view;

struct pull {
	struct sfs_replica *r;
	struct sfs_view *view;
	const struct sfs_manifest *m;
	uint64_t window;
	struct sfs_progress prog;
	int copy;     /* not in place (asked, or it failed once): copy through
		     the cache */
	int strong;   /* local bytes kept on SHA-256 only (--trust-key) */
	mode_t umask; /* the process's: taken from the seed's modes */
	/* update: files kept, rewritten; bytes kept, pulled */
	uint64_t kept_files, changed_files, kept_bytes, pulled_bytes;
};

/* What a file or directory the seed published with @mode gets here. */
mode_t pull_local_mode(const struct pull *p, uint32_t mode);
/* Write bytes [off, off+len) of @f to @fd at the same offsets, the
 * window kept full ahead.  0 or -errno. */
int pull_copy_range(struct pull *p, int fd, const struct sfs_rfile *f,
		    uint64_t off, uint64_t len);
/* The seed left entries out of @m for their names: -ENOENT with them
 * in @err. */
int pull_left_out(const struct sfs_manifest *m, char *err, size_t errlen);
/* Directories' modes and times, DEST's included (after the files). */
int pull_dir_times(const struct pull *p, const char *dest);

/*
 * pull_update - make @dest, which holds an earlier copy (or anything),
 * the current generation: pull_update.c says how, and what a crash
 * leaves.  0 or -errno with one line in @err.
 */
int pull_update(struct pull *p, const char *dest, char *err, size_t errlen);

#endif /* SFS_PULL_IMPL_H */
