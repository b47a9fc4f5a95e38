/* SPDX-License-Identifier: MIT */
/* seed_main.c - the `seedfs seed` command line. */
#include "seed.h"

#include "common/log.h"
#include "common/util.h"
#include "transports/transport.h"

#include <errno.h>
#include <getopt.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *out)
{
	char names[128];
	sfs_xport_known(NULL, names, sizeof(names));
	fprintf(out,
		"usage: seedfs seed --model-dir DIR [options]\n"
		"\n"
		"Publish the model in DIR: validate its safetensors files,\n"
		"register them read-only with the fabric and serve the\n"
		"manifest on the control port.  Prints a line containing\n"
		"'ready' when serving; SIGINT or SIGTERM stop it.\n"
		"\n"
		"options:\n"
		"  --model-dir DIR      model directory to publish (required)\n"
		"  --name NAME          model name (default: DIR's basename)\n"
		"  --listen HOST:PORT   control port (default 0.0.0.0:7070;\n"
		"                       port 0 picks a free one)\n"
		"  --protocol NAME      transport: %s\n"
		"                       (default $SEEDFS_PROTOCOL, else tcp;\n"
		"                       auto: the first of efa, rdma, tcp\n"
		"                       this host can serve)\n"
		"  --fabric-addr HOST   local address for the fabric endpoint\n"
		"                       (default: the --listen host if given)\n"
		"  --inline-max SIZE    files up to SIZE travel in the manifest\n"
		"                       (default 64K)\n"
		"  --mr-max SIZE        register files in pieces of at most\n"
		"                       SIZE (default 1G)\n"
		"  --checksum-chunk SIZE  publish an XXH3-64 per SIZE bytes\n"
		"                       (power of two, default 1M; 0: none);\n"
		"                       --mr-max must be a multiple\n"
		"  --timeout SECONDS    bound on transport waits (default 10)\n"
		"  --test-corrupt FILE:OFFSET  tests only: flip that published\n"
		"                       byte after checksumming\n"
		"  --log-level LEVEL    err, warn, info, debug (default info)\n"
		"  --log-file FILE      log here instead of stderr\n"
		"  -h, --help           this text\n",
		names);
}

enum {
	OPT_MODEL_DIR = 256,
	OPT_NAME,
	OPT_LISTEN,
	OPT_PROTOCOL,
	OPT_FABRIC_ADDR,
	OPT_INLINE_MAX,
	OPT_MR_MAX,
	OPT_TIMEOUT,
	OPT_LOG_LEVEL,
	OPT_LOG_FILE,
	OPT_CHECKSUM_CHUNK,
	OPT_TEST_CORRUPT,
};

static const struct option long_opts[] = {
	{"model-dir", required_argument, NULL, OPT_MODEL_DIR},
	{"name", required_argument, NULL, OPT_NAME},
	{"listen", required_argument, NULL, OPT_LISTEN},
	{"protocol", required_argument, NULL, OPT_PROTOCOL},
	{"fabric-addr", required_argument, NULL, OPT_FABRIC_ADDR},
	{"inline-max", required_argument, NULL, OPT_INLINE_MAX},
	{"mr-max", required_argument, NULL, OPT_MR_MAX},
	{"timeout", required_argument, NULL, OPT_TIMEOUT},
	{"log-level", required_argument, NULL, OPT_LOG_LEVEL},
	{"log-file", required_argument, NULL, OPT_LOG_FILE},
	{"checksum-chunk", required_argument, NULL, OPT_CHECKSUM_CHUNK},
	{"test-corrupt", required_argument, NULL, OPT_TEST_CORRUPT},
	{"help", no_argument, NULL, 'h'},
	{NULL, 0, NULL, 0},
};

static int bad(const char *opt, const char *val)
{
	fprintf(stderr, "seedfs seed: invalid value '%s' for %s\n", val, opt);
	return 2;
}

int sfs_seed_main(int argc, char **argv)
{
	struct sfs_seed_cfg cfg = {.csum_shift = 20,
				   .inline_max = 64 << 10,
				   .mr_max = 1ull << 30,
				   .timeout_ms = 10000};
	const char *listen = "0.0.0.0:7070", *fabric_addr = NULL;
	char host[256], port[16], err[SFS_XPORT_ERR_MAX];
	struct sfs_seed *s = NULL;
	struct sfs_ctl *ctl = NULL;
	unsigned int bound;
	uint64_t v;
	int c, rc;

	const char *opt_protocol = NULL;
	optind = 1;
	while ((c = getopt_long(argc, argv, "h", long_opts, NULL)) != -1) {
		switch (c) {
		case OPT_MODEL_DIR:
			cfg.model_dir = optarg;
			break;
		case OPT_NAME:
			cfg.name = optarg;
			break;
		case OPT_LISTEN:
			listen = optarg;
			break;
		case OPT_PROTOCOL:
			opt_protocol = optarg;
			break;
		case OPT_FABRIC_ADDR:
			fabric_addr = optarg;
			break;
		case OPT_INLINE_MAX:
			if (sfs_parse_size(optarg, &v) || v > (16u << 20))
				return bad("--inline-max", optarg);
			cfg.inline_max = v;
			break;
		case OPT_MR_MAX:
			if (sfs_parse_size(optarg, &v) || v < 4096)
				return bad("--mr-max", optarg);
			cfg.mr_max = v;
			break;
		case OPT_TIMEOUT:
			if (sfs_parse_u64(optarg, &v) || v == 0 || v > 3600)
				return bad("--timeout", optarg);
			cfg.timeout_ms = (unsigned int)v * 1000;
			break;
		case OPT_LOG_LEVEL:
			if (sfs_log_set_level(optarg))
				return bad("--log-level", optarg);
			break;
		case OPT_LOG_FILE:
			if ((rc = sfs_log_to_file(optarg))) {
				fprintf(stderr,
					"seedfs seed: --log-file %s: %s\n",
					optarg, strerror(-rc));
				return 2;
			}
			break;
		case OPT_CHECKSUM_CHUNK:
			if (sfs_parse_size(optarg, &v) ||
			    (v && ((v & (v - 1)) || v < (1u << 12) ||
				   v > (1u << 30))))
				return bad("--checksum-chunk", optarg);
			cfg.csum_shift = v ? (uint32_t)__builtin_ctzll(v) : 0;
			break;
		case OPT_TEST_CORRUPT: {
			char *colon = strrchr(optarg, ':');
			if (!colon || sfs_parse_u64(colon + 1, &v))
				return bad("--test-corrupt", optarg);
			*colon = '\0';
			cfg.test_corrupt_path = optarg;
			cfg.test_corrupt_off = v;
			break;
		}
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "seedfs seed: unexpected argument '%s'\n",
			argv[optind]);
		return 2;
	}
	if (cfg.csum_shift && cfg.mr_max % (1ull << cfg.csum_shift)) {
		fprintf(stderr, "seedfs seed: --mr-max must be a multiple of "
				"--checksum-chunk\n");
		return 2;
	}
	if (!cfg.model_dir) {
		fprintf(stderr, "seedfs seed: --model-dir is required "
				"(seedfs seed --help)\n");
		return 2;
	}
	cfg.protocol =
		sfs_xport_choose(opt_protocol, getenv("SEEDFS_PROTOCOL"));
	if (!cfg.protocol)
		cfg.protocol = "tcp";
	if (sfs_parse_hostport(listen, host, sizeof(host), port, sizeof(port)))
		return bad("--listen", listen);
	cfg.fabric_node = fabric_addr;
	if (!cfg.fabric_node && *host && strcmp(host, "0.0.0.0") &&
	    strcmp(host, "::"))
		cfg.fabric_node = host;

	/* Threads created from here on inherit the blocked signals; this
	 * thread takes them with sigwait. */
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGHUP);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	signal(SIGPIPE, SIG_IGN);

	rc = sfs_seed_open(&cfg, &s, err, sizeof(err));
	if (rc) {
		fprintf(stderr, "seedfs seed: %s\n", err);
		return 1;
	}
	rc = sfs_ctl_start(s, host, port, &ctl, &bound, err, sizeof(err));
	if (rc) {
		fprintf(stderr, "seedfs seed: %s\n", err);
		sfs_seed_close(s);
		return 1;
	}
	char summary[256];
	sfs_seed_summary(s, summary, sizeof(summary));
	int v6 = strchr(host, ':') != NULL;
	printf("seedfs seed: ready on %s%s%s:%u: %s; protocol %s\n",
	       v6 ? "[" : "", *host ? host : "0.0.0.0", v6 ? "]" : "", bound,
	       summary, sfs_seed_protocol(s));
	fflush(stdout);
	SFS_LOG(SFS_INFO, "seed", "serving %s on port %u", summary, bound);

	int sig = 0;
	do {
		sigwait(&set, &sig);
		if (sig == SIGHUP)
			SFS_LOG(SFS_INFO, "seed",
				"SIGHUP: republishing is not supported yet");
	} while (sig == SIGHUP);
	SFS_LOG(SFS_INFO, "seed", "signal %d: stopping", sig);
	sfs_ctl_stop(ctl);
	sfs_seed_close(s);
	return 0;
}
