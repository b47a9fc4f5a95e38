/* SPDX-License-Identifier: MIT */
/* pull.h - the `seedfs pull` command. */
#ifndef SFS_PULL_H
#define SFS_PULL_H

/* sfs_pull_main - copy a published model to a directory; exit status. */
int sfs_pull_main(int argc, char **argv);

#endif /* SFS_PULL_H */
