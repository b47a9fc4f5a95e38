/* SPDX-License-Identifier: MIT */
/*
 * probe.c - `seedfs probe`: for every protocol, can this host serve it?
 * Each protocol is opened for real (fabric, domain, endpoint, progress
 * thread), then closed: what probe says is what seed and mount will do.
 */
#include "cli/cli.h"

#include "common/log.h"
#include "common/util.h"
#include "transports/transport.h"

#include <stdio.h>
#include <string.h>

static void usage(FILE *out)
{
	fprintf(out,
		"usage: seedfs probe [--protocol NAME] [--verbose]\n"
		"\n"
		"For every protocol (or NAME), open it as a replica would\n"
		"and print whether this host can serve it: provider,\n"
		"fabric, domain, MR mode and largest message, or why not.\n"
		"Exits 0 when at least one protocol is available.\n"
		"\n"
		"options:\n"
		"  --protocol NAME   only this protocol\n"
		"  --verbose         keep the transports' log lines (info)\n"
		"  -h, --help        this text\n");
}

int sfs_cli_probe(int argc, char **argv)
{
	const char *only = NULL;
	int verbose = 0, avail = 0;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--protocol") && i + 1 < argc) {
			only = argv[++i];
		} else if (!strcmp(argv[i], "--verbose")) {
			verbose = 1;
		} else if (!strcmp(argv[i], "-h") ||
			   !strcmp(argv[i], "--help")) {
			usage(stdout);
			return 0;
		} else {
			usage(stderr);
			return 2;
		}
	}
	if (only && !sfs_xport_known(only, NULL, 0)) {
		char names[160];
		sfs_xport_known(NULL, names, sizeof(names));
		fprintf(stderr,
			"seedfs probe: unknown protocol '%s'; known: %s\n",
			only, names);
		return 2;
	}
	if (!verbose)
		sfs_log_set_level("err");
	printf("%-12s %-5s %s\n", "protocol", "ok", "details");
	for (size_t i = 0; i < sfs_xport_count() + 1; i++) {
		const char *name = i < sfs_xport_count() ? sfs_xport_name(i)
							 : SFS_XPORT_AUTO;
		if (only && strcmp(only, name))
			continue;
		struct sfs_xport_cfg cfg = {.protocol = name,
					    .role = SFS_XPORT_REPLICA,
					    .timeout_ms = 5000};
		char err[SFS_XPORT_ERR_MAX];
		struct sfs_xport *x;
		if (sfs_xport_open(&cfg, &x, err, sizeof(err))) {
			printf("%-12s %-5s %s\n", name, "no", err);
			continue;
		}
		struct sfs_xport_info in;
		char mm[32];
		sfs_xport_info(x, &in);
		char chose[48] = "";
		if (strcmp(name, in.protocol))
			snprintf(chose, sizeof(chose),
				 "chooses %s: ", in.protocol);
		printf("%-12s %-5s %sprovider %s, fabric %s, domain %s, "
		       "mr_mode %s, max_msg %s\n",
		       name, "yes", chose, in.provider, in.fabric, in.domain,
		       in.mr_desc,
		       sfs_fmt_size_limit(in.max_msg_size, mm, sizeof(mm)));
		sfs_xport_close(x);
		avail += strcmp(name, SFS_XPORT_AUTO) != 0;
	}
	return avail ? 0 : 1;
}
