/* SPDX-License-Identifier: MIT */
/*
 * mntcheck.h - may seedfs mount here?  Checked before anything else, so
 * a wrong mount point is one line and nothing started.
 */
#ifndef SFS_MNTCHECK_H
#define SFS_MNTCHECK_H

#include <stddef.h>

/*
 * sfs_mnt_preflight - refuse a mount point that is not a directory, not
 * empty (unless @nonempty), or where a seedfs mount is already up; a
 * dead seedfs mount found there (its daemon gone, "Transport endpoint is
 * not connected") is detached and the control sockets of dead daemons
 * are removed, which @note then says (else it is empty).  A dead mount
 * of another filesystem is refused.  Returns 0, or -errno with one line
 * in @err.
 */
int sfs_mnt_preflight(const char *mnt, int nonempty, char *err, size_t errlen,
		      char *note, size_t notelen);

#endif /* SFS_MNTCHECK_H */
