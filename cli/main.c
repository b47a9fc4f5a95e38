/* SPDX-License-Identifier: MIT */
/* main.c - `seedfs COMMAND ...`: one binary, one subcommand each. */
#include "cli/cli.h"
#include "common/log.h"

#include <malloc.h>
#include <stdio.h>
#include <string.h>

static void usage(FILE *out)
{
	fprintf(out,
		"usage: seedfs COMMAND [options]\n"
		"\n"
		"seedfs shows the model a running seed publishes as an\n"
		"ordinary, read-only directory; reads are one-sided reads of\n"
		"the seed's registered memory.\n"
		"\n"
		"commands:\n"
		"  seed      publish a model directory\n"
		"  mount     mount what a seed publishes\n"
		"  prefetch  warm a mount's cache with a model's files\n"
		"  pull      copy a published model to a local directory\n"
		"  probe     which protocols this host can serve, or why not\n"
		"  version   print the version\n"
		"\n"
		"seedfs COMMAND --help shows a command's options.\n");
}

int main(int argc, char **argv)
{
	/* Large blocks straight from mmap and back to the system when
	 * freed.  glibc raises its mmap threshold to the largest block
	 * freed (libfabric's tcp endpoint buffers: about 14 MiB), after
	 * which such blocks come from the threads' arenas and stay
	 * resident once freed: a mount whose re-seeders came and went grew
	 * by 14 MiB per arena that ever connected one (sources_churn).
	 * Setting it fixes it (and turns the dynamic threshold off). */
	mallopt(M_MMAP_THRESHOLD, 1 << 20);
	if (argc < 2) {
		usage(stderr);
		return 2;
	}
	const char *cmd = argv[1];
	if (strcmp(cmd, "seed") == 0) {
		sfs_log_program("seedfs-seed");
		return sfs_cli_seed(argc - 1, argv + 1);
	}
	if (strcmp(cmd, "mount") == 0) {
		sfs_log_program("seedfs-mount");
		return sfs_cli_mount(argc - 1, argv + 1);
	}
	/* Those that serve nobody: out of core dumps from the start
	 * (cli_no_dumps; seed and mount decide once they know what they
	 * serve). */
	if (strcmp(cmd, "pull") == 0) {
		sfs_log_program("seedfs-pull");
		cli_no_dumps("pull", NULL);
		return sfs_cli_pull(argc - 1, argv + 1);
	}
	if (strcmp(cmd, "prefetch") == 0) {
		sfs_log_program("seedfs-prefetch");
		cli_no_dumps("prefetch", NULL);
		return sfs_cli_prefetch(argc - 1, argv + 1);
	}
	if (strcmp(cmd, "probe") == 0) {
		cli_no_dumps("probe", NULL);
		return sfs_cli_probe(argc - 1, argv + 1);
	}
	if (strcmp(cmd, "version") == 0 || strcmp(cmd, "--version") == 0) {
		printf("seedfs %s\n", SEEDFS_VERSION);
		return 0;
	}
	if (strcmp(cmd, "help") == 0 || strcmp(cmd, "--help") == 0 ||
	    strcmp(cmd, "-h") == 0) {
		usage(stdout);
		return 0;
	}
	fprintf(stderr, "seedfs: unknown command '%s'\n", cmd);
	usage(stderr);
	return 2;
}
