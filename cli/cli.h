/* SPDX-License-Identifier: MIT */
/*
 * cli.h - the seedfs command's subcommands: each parses its options,
 * prints its --help, calls the layers below and returns the exit status.
 */
#ifndef SFS_CLI_H
#define SFS_CLI_H

int sfs_cli_seed(int argc, char **argv);     /* seed.c */
int sfs_cli_mount(int argc, char **argv);    /* mount.c */
int sfs_cli_pull(int argc, char **argv);     /* pull.c */
int sfs_cli_prefetch(int argc, char **argv); /* prefetch.c */
int sfs_cli_probe(int argc, char **argv);    /* probe.c */

#endif /* SFS_CLI_H */
