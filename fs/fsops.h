/* SPDX-License-Identifier: MIT */
/*
 * fsops.h - FUSE low-level operations over a replica (replica/): names
 * and attributes from its tree, bytes from its reads.  The only place
 * that converts errors into FUSE replies.
 */
#ifndef SFS_FSOPS_H
#define SFS_FSOPS_H

#define FUSE_USE_VERSION 314
#include <fuse_lowlevel.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <time.h>

struct sfs_tree;
struct sfs_replica;
struct open_file;
struct sfs_readq;

/* At most this many operations that may wait on a source (data reads,
 * and opens, which ask it for its generation) run on libfuse's workers
 * at once, the rest on the mount's read or open threads (fs/readq.h,
 * @readq and @openq below): a lone reader's requests are not handed
 * from thread to thread, and however many wait on a stalled source, the
 * workers but these stay free for status, lookups and attributes. */
#define SFS_FS_WORKER_WAITS 2

struct sfs_fs {
	struct sfs_replica *r;	 /* borrowed */
	struct sfs_tree *tree;	 /* borrowed from r */
	pthread_rwlock_t *lock;	 /* r's: guards the tree (a generation
				   rewrites it) */
	double entry_timeout;	 /* seconds the kernel may cache names */
	double negative_timeout; /* and that a name is not there */
	double attr_timeout;	 /* and attributes (an inode's never change) */
	unsigned int max_background; /* 0: kernel default */
	int direct_io; /* -o direct_io: model files bypass the page cache */
	uid_t uid;
	gid_t gid;
	struct timespec mtime; /* of every inode: when mounted */
	uint64_t total_bytes;  /* for statfs */
	/* Reads that may wait for a source are answered there, not on
	 * libfuse's workers [borrowed]; NULL: each is answered on the
	 * worker that took it. */
	struct sfs_readq *readq;
	/* The same for opens [borrowed]: threads of their own, never
	 * queued behind reads; NULL: answered on the worker. */
	struct sfs_readq *openq;
	/* Reads and opens that may wait running on libfuse's workers
	 * now: at most SFS_FS_WORKER_WAITS (the others go to @readq or
	 * @openq). */
	atomic_uint worker_waits;
	atomic_int stopping; /* the session is ending (serve.c sets it) */
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
