/* SPDX-License-Identifier: MIT */
/*
 * pull.c - `seedfs pull --seed HOST:PORT NAME DEST`: copy a published
 * model to a local directory, no FUSE in the data path (replica/pull.h).
 */
#include "cli/cli.h"

#include "common/log.h"
#include "common/util.h"
#include "control/control.h"
#include "control/registry.h"
#include "replica/pull.h"
#include "replica/replica.h"
#include "transports/transport.h"

#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *out)
{
	fprintf(out,
		"usage: seedfs pull --seed HOST:PORT[,HOST:PORT...] NAME DEST "
		"[options]\n"
		"       seedfs pull --registry etcd://HOST:PORT[,...][/PREFIX] "
		"NAME DEST [options]\n"
		"\n"
		"Copy the model NAME a seed publishes into the directory DEST\n"
		"(created; it must not exist or be empty, unless --update),\n"
		"byte-identical and\n"
		"verified against the seed's checksums, at transport speed.\n"
		"Files and directories get the seed's times and permission\n"
		"bits, without set-id and sticky bits and minus the umask.\n"
		"\n"
		"options:\n"
		"  --seed [https://]HOST:PORT[,...]  the seeds' control ports (this or\n"
		"                       --registry is required; may be given\n"
		"                       again); the bytes come from every one\n"
		"                       of the same content\n"
		"  --registry etcd://HOST:PORT[,...][/PREFIX]  every source\n"
		"                       recorded there (etcds://: TLS)\n"
		"  --registry-ca FILE   with etcds://, the CA of etcd\n"
		"  --registry-auth-file FILE  USER:PASSWORD for etcd\n"
		"  --token-file FILE    the seeds' token (one line; default\n"
		"                       $SEEDFS_TOKEN_FILE, naming the file)\n"
		"  --tls-ca FILE        TLS, the seeds verified against this CA\n"
		"  --tls-pin PIN        TLS, the seeds held to this public key\n"
		"                       (sha256//BASE64, as the seed prints it)\n"
		"  --trust-key FILE     take only manifests signed by a key in\n"
		"                       FILE (PEM public keys), every chunk\n"
		"                       checked with its SHA-256; no lapsed\n"
		"                       signature, no generation older than one\n"
		"                       taken before (remembered in\n"
		"                       $SEEDFS_STATE_DIR, /var/lib/seedfs for\n"
		"                       root, else $XDG_STATE_HOME/seedfs)\n"
		"  --protocol NAME      as for mount (default: the seed's first\n"
		"                       protocol this host can use)\n"
		"  --cache-size SIZE    memory for chunks in flight (default 64M)\n"
		"  --in-place           pull straight into the new files' pages\n"
		"                       (no copy; faster where the NIC does the\n"
		"                       transport's copy, slower on tmpfs here)\n"
		"  --update             DEST may hold an earlier copy: every file\n"
		"                       is compared with the seed's checksums,\n"
		"                       chunk by chunk, and only the chunks that\n"
		"                       differ are pulled and written; what the\n"
		"                       model does not have is removed from DEST.\n"
		"                       Files being changed are missing from\n"
		"                       their names until all are done: after a\n"
		"                       crash DEST is the old copy, the new one,\n"
		"                       or visibly incomplete (run it again)\n"
		"  --timeout SECONDS    bound on every wait (default 10)\n"
		"  --log-level LEVEL    err, warn, info, debug (default warn)\n"
		"  --log-format FORMAT  text (default) or json: one object a\n"
		"                       line, for log shippers\n"
		"  -h, --help           this text\n");
}

int sfs_cli_pull(int argc, char **argv)
{
	static const struct option opts[] = {
		{"seed", required_argument, NULL, 's'},
		{"protocol", required_argument, NULL, 'p'},
		{"cache-size", required_argument, NULL, 'c'},
		{"timeout", required_argument, NULL, 't'},
		{"log-level", required_argument, NULL, 'l'},
		{"log-format", required_argument, NULL, 'f'},
		{"registry", required_argument, NULL, 'r'},
		{"registry-ca", required_argument, NULL, 'a'},
		{"registry-auth-file", required_argument, NULL, 'u'},
		{"in-place", no_argument, NULL, 'i'},
		{"update", no_argument, NULL, 'U'},
		{"token-file", required_argument, NULL, 'T'},
		{"tls-ca", required_argument, NULL, 'C'},
		{"tls-pin", required_argument, NULL, 'P'},
		{"trust-key", required_argument, NULL, 'K'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	const char *protocol = NULL;
	struct cli_seeds seeds = {.https = -1};
	struct cli_sec sec = {0};
	struct sfs_control_cred *cred = NULL;
	uint64_t cache_size = 64u << 20, v;
	unsigned int timeout_ms = 10000;
	char err[SFS_XPORT_ERR_MAX] = "";
	struct sfs_reg_cfg rcfg = {0};
	struct sfs_reg *reg = NULL;
	int c, place = 0, update = 0;

	sfs_log_set_level("warn");
	optind = 1;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 's':
			if (cli_seeds_add(&seeds, optarg, "seedfs pull")) {
				cli_seeds_free(&seeds);
				return 2;
			}
			break;
		case 'p':
			protocol = optarg;
			break;
		case 'r':
			rcfg.url = optarg;
			break;
		case 'a':
			rcfg.ca_file = optarg;
			break;
		case 'u':
			rcfg.auth_file = optarg;
			break;
		case 'i':
			place = 1;
			break;
		case 'U':
			update = 1;
			break;
		case 'T':
			sec.token_file = optarg;
			break;
		case 'C':
			sec.tls_ca = optarg;
			break;
		case 'P':
			sec.tls_pin = optarg;
			break;
		case 'K':
			sec.trust_key = optarg;
			break;
		case 'c':
			if (sfs_parse_size(optarg, &v) || v < (16u << 20)) {
				fprintf(stderr,
					"seedfs pull: invalid "
					"--cache-size '%s'\n",
					optarg);
				return 2;
			}
			cache_size = v;
			break;
		case 't':
			if (sfs_parse_u64(optarg, &v) || !v || v > 3600) {
				fprintf(stderr,
					"seedfs pull: invalid "
					"--timeout '%s'\n",
					optarg);
				return 2;
			}
			timeout_ms = (unsigned int)v * 1000;
			break;
		case 'l':
			if (sfs_log_set_level(optarg)) {
				fprintf(stderr,
					"seedfs pull: invalid "
					"--log-level '%s'\n",
					optarg);
				return 2;
			}
			break;
		case 'f':
			if (sfs_log_set_format(optarg)) {
				fprintf(stderr,
					"seedfs pull: invalid "
					"--log-format '%s' (text or json)\n",
					optarg);
				return 2;
			}
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (place && update) {
		fprintf(stderr, "seedfs pull: --in-place and --update cannot "
				"be combined (an update builds new files)\n");
		cli_seeds_free(&seeds);
		return 2;
	}
	if ((!seeds.n && !rcfg.url) || argc - optind != 2) {
		cli_seeds_free(&seeds);
		usage(stderr);
		return 2;
	}
	const char *name = argv[optind], *dest = argv[optind + 1];
	protocol = sfs_xport_choose(protocol, getenv("SEEDFS_PROTOCOL"));

	struct sfs_replica_cfg rc = {.seeds = (const char *const *)seeds.list,
				     .nseeds = seeds.n,
				     .only = name,
				     .protocol = protocol,
				     .timeout_ms = timeout_ms,
				     .cache_size = cache_size,
				     .chunk_size = 1u << 20,
				     .start_ms = sfs_now_ms(),
				     .who = "seedfs pull"};
	struct sfs_replica *r;

	if (cli_cred(&sec, &seeds, "seedfs pull", &cred)) {
		cli_seeds_free(&seeds);
		return 2;
	}
	rc.cred = cred;
	if (sfs_control_init()) {
		fprintf(stderr, "seedfs pull: cannot initialize libcurl\n");
		sfs_control_cred_free(cred);
		cli_seeds_free(&seeds);
		return 1;
	}
	if ((rcfg.url && sfs_reg_open(&rcfg, &reg, err, sizeof(err))) ||
	    (rc.registry = reg, sfs_replica_open(&rc, &r, err, sizeof(err)))) {
		cli_err("seedfs pull", err);
		sfs_reg_free(reg);
		sfs_control_cred_free(cred);
		cli_seeds_free(&seeds);
		return 1;
	}
	sfs_replica_ready(r);
	struct sfs_pull_stats ps = {0};
	struct sfs_pull_cfg pc = {.window = cache_size / 2,
				  .place = place,
				  .update = update,
				  .strong = sec.trust_key != NULL,
				  .stats = &ps};
	int status = sfs_pull(r, name, dest, &pc, err, sizeof(err));
	if (status)
		cli_err("seedfs pull", err);
	else if (update)
		printf("seedfs pull: %s is generation %" PRIu64 " of %s: "
		       "%" PRIu64 " files kept, %" PRIu64 " changed; %" PRIu64
		       " bytes pulled, %" PRIu64 " kept\n",
		       dest, ps.generation, name, ps.kept_files,
		       ps.changed_files, ps.pulled_bytes, ps.kept_bytes);
	sfs_replica_close(r);
	sfs_reg_free(reg);
	sfs_control_cred_free(cred);
	cli_seeds_free(&seeds);
	return status ? 1 : 0;
}
