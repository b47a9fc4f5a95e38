/* SPDX-License-Identifier: MIT */
/*
 * walk.h - list a model directory for publishing.
 *
 * Subdirectories are kept (empty ones too), empty files are kept,
 * symlinks are followed only when they resolve inside the directory and
 * do not loop back to an ancestor.  Anything skipped is logged with its
 * reason.  Entries come sorted by path, parents before children.
 */
#ifndef SFS_WALK_H
#define SFS_WALK_H

#include <stddef.h>
#include <stdint.h>

enum sfs_walk_type {
	SFS_WALK_DIR,
	SFS_WALK_FILE,
};

struct sfs_walk_entry {
	char *rel; /* path relative to the root, '/'-separated */
	char *abs; /* resolved absolute path to open */
	enum sfs_walk_type type;
	uint64_t size;	  /* files */
	int64_t mtime_ns; /* of what it resolves to */
	uint32_t mode;	  /* its permission bits */
};

struct sfs_walk {
	size_t n, cap;
	struct sfs_walk_entry *e;
	int64_t root_mtime_ns; /* of the directory walked */
	uint32_t root_mode;
};

/*
 * sfs_walk_dir - walk @root.  On success *out [new] is freed with
 * sfs_walk_free.  Returns 0, or -errno with one line in @err.
 * Not thread safe with respect to @root changing underneath.
 */
int sfs_walk_dir(const char *root, struct sfs_walk **out, char *err,
		 size_t errlen);
void sfs_walk_free(struct sfs_walk *w);

#endif /* SFS_WALK_H */
