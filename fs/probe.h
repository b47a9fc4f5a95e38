/* SPDX-License-Identifier: MIT */
/* probe.h - the `seedfs probe` command. */
#ifndef SFS_PROBE_H
#define SFS_PROBE_H

/* sfs_probe_main - print what this host can serve; the exit status. */
int sfs_probe_main(int argc, char **argv);

#endif /* SFS_PROBE_H */
