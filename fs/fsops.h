/* SPDX-License-Identifier: MIT */
/*
 * fsops.h - FUSE low-level operations over a tree and a chunk cache.
 * The only place that converts errors into FUSE replies.
 */
#ifndef SFS_FSOPS_H
#define SFS_FSOPS_H

#define FUSE_USE_VERSION 314
#include <fuse_lowlevel.h>

#include <pthread.h>
#include <stdint.h>
#include <time.h>

struct sfs_tree;
struct sfs_cache;
struct sfs_gens;
struct open_file;

struct sfs_fs {
	pthread_rwlock_t lock;	 /* guards the tree: a generation rewrites it */
	struct sfs_tree *tree;	 /* borrowed */
	struct sfs_gens *gens;	 /* borrowed */
	struct sfs_cache *cache; /* borrowed */
	double entry_timeout;	 /* seconds the kernel may cache names */
	double negative_timeout; /* and that a name is not there */
	double attr_timeout;	 /* and attributes (an inode's never change) */
	unsigned int max_background; /* 0: kernel default */
	uid_t uid;
	gid_t gid;
	struct timespec mtime;	 /* of every inode: when mounted */
	uint64_t total_bytes;	 /* for statfs */
	uint64_t ra_min, ra_max; /* read-ahead window; ra_max 0: off */
	/* Renders .seedfs/status: *text [new, free()], 0 or -errno. */
	int (*status)(void *arg, char **text, size_t *len);
	void *status_arg;
	pthread_mutex_t handles_lock;
	struct open_file *handles; /* protected by handles_lock */
};

/*
 * sfs_fs_release_all - free the handles the kernel never released (the
 * connection ended with files open): after the session loop, before the
 * generations go.  Not thread safe with requests.
 */
void sfs_fs_release_all(struct sfs_fs *fs);

/* The operations table; userdata is a struct sfs_fs. */
extern const struct fuse_lowlevel_ops sfs_fs_ops;

#endif /* SFS_FSOPS_H */
