/* SPDX-License-Identifier: MIT */
/*
 * walk.h - list a model directory for publishing.
 *
 * Subdirectories are kept (empty ones too), empty files are kept,
 * anything but directories and regular files is skipped.  Symbolic
 * links are followed only when what they resolve to stays inside the
 * model directory (and does not loop back to an ancestor), or, when the
 * model directory is a Hugging Face cache snapshot (REPO/snapshots/REV),
 * when it is a file in that repository's REPO/blobs.  Anything skipped
 * is logged with its reason (a link outside: its name and target).
 * Entries come sorted by path, parents before children.
 *
 * The walk holds a descriptor of the model directory (and of the blobs
 * directory) and reaches everything below through descriptors and
 * O_NOFOLLOW, so a link swapped in while it runs is never followed;
 * sfs_walk_open opens a file the same way and only if it is still the
 * inode the walk saw.
 */
#ifndef SFS_WALK_H
#define SFS_WALK_H

#include <stddef.h>
#include <stdint.h>

#define SFS_WALK_BASES 2 /* the model directory; an HF snapshot's blobs */
#define SFS_WALK_SKIPPED_KEPT 4 /* names of entries left out, kept */

enum sfs_walk_type {
	SFS_WALK_DIR,
	SFS_WALK_FILE,
};

struct sfs_walk_entry {
	char *rel;	   /* path relative to the root, '/'-separated */
	char *abs;	   /* absolute path of what it resolves to (messages,
		      watches) */
	const char *below; /* in @abs: the path below base @base */
	unsigned int base; /* the directory it was found in */
	enum sfs_walk_type type;
	uint64_t size;	   /* files */
	int64_t mtime_ns;  /* of what it resolves to */
	uint32_t mode;	   /* its permission bits */
	uint64_t dev, ino; /* the inode the walk saw */
};

struct sfs_walk {
	size_t n, cap;
	struct sfs_walk_entry *e;
	int64_t root_mtime_ns; /* of the directory walked */
	uint32_t root_mode;
	/* Entries left out because their paths cannot be published
	 * (sfs_path_check): how many, and the first paths (raw bytes;
	 * owned). */
	uint64_t nskipped;
	char *skipped[SFS_WALK_SKIPPED_KEPT];
	/* Where entries are found: [0] the model directory, [1] the blobs of
	 * the Hugging Face repository it is a snapshot of (-1, NULL: it is
	 * not one).  Open until sfs_walk_free. */
	int base_fd[SFS_WALK_BASES];
	char *base_path[SFS_WALK_BASES];
};

/*
 * sfs_walk_dir - walk @root.  On success *out [new] is freed with
 * sfs_walk_free.  Returns 0, or -errno with one line in @err.
 * Not thread safe with respect to @root changing underneath: what
 * changes is skipped or refused later by sfs_walk_open, never followed.
 */
int sfs_walk_dir(const char *root, struct sfs_walk **out, char *err,
		 size_t errlen);

/*
 * sfs_walk_open - open file entry @e of @w for reading, without
 * following any link and without blocking (O_NOFOLLOW | O_NONBLOCK
 * below the walk's descriptor), and only if it is the regular file the
 * walk saw: same device, inode and size.  *fd [new] is the caller's to
 * close.  Returns 0, -ESTALE when it changed since the walk (another
 * file renamed over it, a link, a FIFO, another size), or -errno; one
 * line in @err naming the file and why.  Thread safe.
 */
int sfs_walk_open(const struct sfs_walk *w, const struct sfs_walk_entry *e,
		  int *fd, char *err, size_t errlen);

/* sfs_walk_free - close and free.  NULL is fine. */
void sfs_walk_free(struct sfs_walk *w);

#endif /* SFS_WALK_H */
