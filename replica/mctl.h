/* SPDX-License-Identifier: MIT */
/*
 * mctl.h - the mount daemon's control socket, which `seedfs prefetch`
 * talks to.  A unix stream socket, mode 0600, only for the daemon's own
 * user and root: /run/seedfs/mount-PID.sock for root, else under
 * $XDG_RUNTIME_DIR (or /tmp/seedfs-UID).  A directory made by someone
 * else, a symlink, or one others may enter is not used (no socket, one
 * line why).  .seedfs/status names it.
 *
 * One request per connection, text lines:
 *   client:  "path REL\n" (one per path, relative to the mount root)
 *            "prefetch\n"
 *   daemon:  "note TEXT\n"...  "progress DONE TOTAL\n"...  then
 *            "done MS\n" or "error TEXT\n"
 * or, to learn which mount this daemon serves and how (seedfs.safe_open
 * checks that before it trusts what a mount names, docs/security.md):
 *   client:  "identify\n"
 *   daemon:  "mount MAJOR:MINOR\n" (the device of the mount it serves,
 *            as stat(2) of the mount point gives it), "status LINE\n"
 *            for each line of .seedfs/status, "done 0\n"; or "error
 *            TEXT\n" (not mounted yet)
 * The caller checks the answering process with SO_PEERCRED.
 * A client that goes away stops its prefetch.  No client can hold the
 * daemon: its request must arrive within 5 s, and a line it does not
 * take within 5 s (it stopped reading; progress comes every 100 ms)
 * drops it, with one log line naming its pid, and stops its prefetch;
 * during an unmount a line waits at most 1 s (mctl.c, docs/cache.md).
 */
#ifndef SFS_MCTL_H
#define SFS_MCTL_H

#include <stddef.h>

struct sfs_mctl;
struct sfs_replica;

/*
 * sfs_mctl_start - listen and serve requests on threads of its own.  @r
 * [borrowed] must outlive sfs_mctl_stop.  *out [new].  Returns 0 or
 * -errno with one line in @err.
 */
int sfs_mctl_start(struct sfs_replica *r, struct sfs_mctl **out, char *err,
		   size_t errlen);

/*
 * sfs_mctl_set_mount - the device of the mount this daemon serves, once
 * mounted (identify answers with it; before, it says "not mounted").
 * Thread safe.
 */
void sfs_mctl_set_mount(struct sfs_mctl *c, unsigned int major,
			unsigned int minor);

/* sfs_mctl_path - the socket's path [borrowed]. */
const char *sfs_mctl_path(const struct sfs_mctl *c);

/*
 * sfs_mctl_prefetch_all - --prefetch: warm every file of the mount in the
 * background, progress in the log.  Returns 0 or -errno (not started).
 */
int sfs_mctl_prefetch_all(struct sfs_mctl *c);

/*
 * sfs_mctl_remove_stale - remove the sockets of mount daemons that are
 * gone (mount-PID.sock whose PID no longer runs) from this user's
 * socket directory.  Returns how many.
 */
int sfs_mctl_remove_stale(void);

/*
 * sfs_mctl_stop - stop listening, stop every prefetch and wait for them
 * (each stops after its current chunk, within the cache's timeout, and
 * drops a client that has not taken its last line within 1 s), remove
 * the socket, free.  No job runs after it returns.  NULL is fine.
 */
void sfs_mctl_stop(struct sfs_mctl *c);

#endif /* SFS_MCTL_H */
