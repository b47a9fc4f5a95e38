/* SPDX-License-Identifier: MIT */
/*
 * serve.h - a replica as a FUSE filesystem: the session, the mount, the
 * kernel's read-ahead for it, the ready signal and the session loop.
 */
#ifndef SFS_SERVE_H
#define SFS_SERVE_H

#define FUSE_USE_VERSION 314
#include <fuse_lowlevel.h>

#include <stdint.h>

struct sfs_replica;

/* The mount's read threads (fs/readq.h): at most this many (or
 * -o max_threads, if more), started as reads that wait need them; at
 * most SFS_FS_READ_QUEUE reads queued for them (beyond, a read is
 * answered on libfuse's worker that took it). */
#define SFS_FS_READ_THREADS 64
#define SFS_FS_READ_QUEUE 65536
/* Threads of their own for opens that may wait (a close-to-open question
 * to a stalled seed, 3 s at most): never queued behind reads, which wait
 * up to --timeout.  At most this many, and SFS_FS_OPEN_QUEUE queued. */
#define SFS_FS_OPEN_THREADS 16
#define SFS_FS_OPEN_QUEUE 65536

struct sfs_serve_cfg {
	unsigned int read_ahead_kb;  /* 0: the kernel's */
	unsigned int max_background; /* 0: the kernel's */
	int prefetch;		     /* warm every file once mounted */
	int direct_io;		     /* -o direct_io */
	/* Background: told 'R' once the mount is ready ('F' on failure),
	 * then stdio goes to /dev/null and logs to syslog (unless
	 * @log_file).  -1: foreground. */
	int ready_fd;
	const char *log_file;
};

/*
 * sfs_fs_serve - mount @r at cmd->mountpoint and serve it until
 * unmounted or signalled; @args are libfuse's.  One line on stderr for
 * what fails before the mount is up.  Returns 0 (a clean stop,
 * including by a signal) or 1.  @r stays the caller's, stopped (its
 * generations no longer followed) when this returns.
 */
int sfs_fs_serve(struct sfs_replica *r, struct fuse_args *args,
		 struct fuse_cmdline_opts *cmd,
		 const struct sfs_serve_cfg *cfg);

#endif /* SFS_SERVE_H */
