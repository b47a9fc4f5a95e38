/* SPDX-License-Identifier: MIT */
/* mount.h - the `seedfs mount` command. */
#ifndef SFS_MOUNT_H
#define SFS_MOUNT_H

/* sfs_mount_main - parse, fetch, mount, serve; returns the exit status. */
int sfs_mount_main(int argc, char **argv);

#endif /* SFS_MOUNT_H */
