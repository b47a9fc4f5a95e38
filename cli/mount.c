/* SPDX-License-Identifier: MIT */
/*
 * mount.c - `seedfs mount --seed HOST:PORT MOUNTPOINT`.
 *
 * Everything that can fail (fetching and checking the manifest, opening
 * the transport, registering the cache, mounting) happens before the
 * command returns; with -f absent the work runs in a child that tells
 * the waiting parent through a pipe when the mount is ready, so the
 * exit status and the one error line are those of the real attempt.
 */
#include "cli/cli.h"

#include "common/log.h"
#include "common/mem.h"
#include "common/util.h"
#include "fs/mntcheck.h"
#include "fs/serve.h"
#include "control/auth.h"
#include "control/control.h"
#include "control/ctlsrv.h"
#include "metadata/identity.h"
#include "control/registry.h"
#include "control/tls.h"
#include "replica/replica.h"
#include "transports/transport.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <limits.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct mount_opts {
	char *seed;
	char *protocol;
	char *timeout;
	char *cache_size;
	char *cache_dir;
	char *cache_dir_size;
	char *cache_idle;
	char *chunk_size;
	char *read_ahead_kb;
	char *max_background;
	char *max_models;
	char *ahead;
	char *require;
	char *listen;
	char *registry;
	char *registry_ca;
	char *registry_auth_file;
	char *token_file;
	char *tls_ca;
	char *tls_pin;
	char *trust_key;
	char *tls_cert;
	char *tls_key;
	char *metrics_listen;
	char *grace;
	char *metrics_token_file;
	char *test_verify_delay;
	int reseed;
	int test_corrupt_slab;
	int no_verify;
	int prefetch;
	int no_tensor_ahead;
	int nonempty;
	int direct_io;
	char *mnt; /* the first non-option argument: the mount point */
	char *log_level;
	char *log_file;
	char *log_format;
	int help;
	int version;
};

#define OPT(t, f)                                                              \
	{                                                                      \
		t, offsetof(struct mount_opts, f), 0                           \
	}

static const struct fuse_opt mount_spec[] = {
	OPT("--seed=%s", seed),
	OPT("--protocol=%s", protocol),
	OPT("--timeout=%s", timeout),
	OPT("--cache-size=%s", cache_size),
	OPT("--cache-dir=%s", cache_dir),
	OPT("--cache-dir-size=%s", cache_dir_size),
	OPT("--cache-idle=%s", cache_idle),
	OPT("--chunk-size=%s", chunk_size),
	OPT("--read-ahead-kb=%s", read_ahead_kb),
	OPT("--max-background=%s", max_background),
	OPT("--max-models=%s", max_models),
	OPT("--ahead=%s", ahead),
	OPT("--require=%s", require),
	OPT("--listen=%s", listen),
	OPT("--registry-ca=%s", registry_ca),
	OPT("--registry-auth-file=%s", registry_auth_file),
	OPT("--registry=%s", registry),
	OPT("--token-file=%s", token_file),
	OPT("--tls-ca=%s", tls_ca),
	OPT("--tls-pin=%s", tls_pin),
	OPT("--trust-key=%s", trust_key),
	OPT("--tls-cert=%s", tls_cert),
	OPT("--tls-key=%s", tls_key),
	OPT("--metrics-listen=%s", metrics_listen),
	OPT("--grace=%s", grace),
	OPT("--metrics-token-file=%s", metrics_token_file),
	{"--reseed", offsetof(struct mount_opts, reseed), 1},
	{"--test-corrupt-slab", offsetof(struct mount_opts, test_corrupt_slab),
	 1},
	OPT("--test-verify-delay=%s", test_verify_delay),
	{"nonempty", offsetof(struct mount_opts, nonempty), 1},
	{"direct_io", offsetof(struct mount_opts, direct_io), 1},
	{"--no-verify", offsetof(struct mount_opts, no_verify), 1},
	{"--prefetch", offsetof(struct mount_opts, prefetch), 1},
	{"--no-tensor-ahead", offsetof(struct mount_opts, no_tensor_ahead), 1},
	OPT("--log-level=%s", log_level),
	OPT("--log-file=%s", log_file),
	OPT("--log-format=%s", log_format),
	{"-h", offsetof(struct mount_opts, help), 1},
	{"--help", offsetof(struct mount_opts, help), 1},
	{"-V", offsetof(struct mount_opts, version), 1},
	{"--version", offsetof(struct mount_opts, version), 1},
	FUSE_OPT_END};

/*
 * The table has only "--name=%s" forms: fuse_opt takes a template
 * "--name %s" for every argument that starts with --name (so
 * --cache-dir-size would set --cache-dir too).  "--name VALUE" is made
 * "--name=VALUE" here first.  *out [new], its strings [new] too; NULL
 * when out of memory.
 */
static char **join_values(int argc, char **argv)
{
	char **out = calloc((size_t)argc + 1, sizeof(*out));
	int n = 0;
	if (!out)
		return NULL;
	for (int i = 0; i < argc; i++) {
		const char *a = argv[i];
		int takes = 0;
		for (const struct fuse_opt *o = mount_spec; o->templ && i > 0;
		     o++) {
			size_t l = strlen(o->templ);
			if (l > 3 && !strcmp(o->templ + l - 3, "=%s") &&
			    strlen(a) == l - 3 && !strncmp(a, o->templ, l - 3))
				takes = 1;
		}
		if (takes && i + 1 < argc) {
			size_t l = strlen(a) + strlen(argv[i + 1]) + 2;
			if ((out[n] = malloc(l)))
				snprintf(out[n], l, "%s=%s", a, argv[i + 1]);
			i++;
		} else {
			out[n] = strdup(a);
		}
		if (!out[n++]) {
			for (int k = 0; k < n; k++)
				free(out[k]);
			free(out);
			return NULL;
		}
	}
	return out;
}

/* Resolved settings. */
struct mount_cfg {
	struct cli_seeds seeds; /* owned */
	const char *protocol;	/* NULL: what the seed publishes */
	unsigned int timeout_ms;
	uint64_t cache_size;
	const char *cache_dir;	 /* NULL: no disk tier */
	uint64_t cache_dir_size; /* 0: the filesystem's room */
	unsigned int cache_idle_ms;
	uint32_t chunk_size;
	unsigned int read_ahead_kb;
	unsigned int max_background;
	size_t max_models; /* 0: the replica's default */
	uint64_t ahead;	   /* largest read-ahead window; 0: off */
	int no_verify;
	int prefetch;	     /* warm every file once mounted */
	int no_tensor_ahead; /* read-ahead for sequential readers only */
	int direct_io;	     /* -o direct_io */
	struct sfs_require *require; /* owned; NULL: show every source */
	const char *require_text;
	const char *reseed;	 /* serve what it holds here, or NULL */
	uint32_t reseed_grace_s; /* its old key after a rotation */
	int test_corrupt_slab;	 /* tests: it serves wrong bytes */
	unsigned int test_verify_delay_ms; /* tests: a verification waits */
	const char *metrics_listen;	   /* GET /metrics here, or NULL */
	struct sfs_auth *metrics_auth;	   /* owned: --metrics-token-file */
	struct sfs_reg_cfg registry;	   /* .url NULL: none */
	uint64_t start_ms; /* when the command started (monotonic) */
	struct sfs_control_cred *cred; /* owned: token and TLS */
	struct sfs_tls_pair *tls;      /* owned: --tls-cert/--tls-key */
};

static void usage(void)
{
	char names[128];
	sfs_xport_known(NULL, names, sizeof(names));
	printf("usage: seedfs mount --seed HOST:PORT[,HOST:PORT...] MOUNTPOINT "
	       "[options]\n"
	       "       seedfs mount --registry etcd://HOST:PORT[,...][/PREFIX] "
	       "MOUNTPOINT [options]\n"
	       "\n"
	       "Mount every model the seeds publish at MOUNTPOINT/NAME,\n"
	       "read-only.  Reads become one-sided reads of the seeds' memory,\n"
	       "spread over every seed that publishes the same content.  Goes\n"
	       "to the background once mounted (unless -f); fusermount3 -u\n"
	       "MOUNTPOINT or SIGTERM unmounts.\n"
	       "\n"
	       "seedfs options:\n"
	       "    --seed [https://]HOST:PORT[,...]\n"
	       "                           the seeds' control ports (this or\n"
	       "                           --registry is required):\n"
	       "                           each one that publishes a model's\n"
	       "                           content is a source of it; the\n"
	       "                           first that answers leads its\n"
	       "                           generations\n"
	       "    --registry etcd://HOST:PORT[,...][/PREFIX]\n"
	       "                           every source recorded in this etcd\n"
	       "                           (etcds://: TLS), followed by watch:\n"
	       "                           models come and go, new sources and\n"
	       "                           generations are used at once\n"
	       "                           (docs/registry.md)\n"
	       "%s"
	       "    --registry-ca FILE     with etcds://, the CA of etcd's\n"
	       "                           certificate (default: the system's)\n"
	       "    --registry-auth-file FILE  USER:PASSWORD for etcd on its\n"
	       "                           first line\n"
	       "    --protocol NAME        the transport, one of\n"
	       "                           %s;\n"
	       "                           default $SEEDFS_PROTOCOL, else\n"
	       "                           (and for auto) what the seed\n"
	       "                           publishes\n"
	       "    --timeout SECONDS      a read fails with EIO once the seed\n"
	       "                           made no progress for this long\n"
	       "                           (default 10); a slow link is not\n"
	       "                           a failure\n"
	       "    --cache-size SIZE      chunk cache in registered memory\n"
	       "                           (default 1/16 of RAM, 64M to 4G,\n"
	       "                           at most half of what the machine\n"
	       "                           and the cgroup can give; more than\n"
	       "                           they can give is refused)\n"
	       "    --cache-idle SECONDS   after this long without a pull, free\n"
	       "                           cache memory past 32 MiB goes back\n"
	       "                           to the kernel (tcp, shm; default 30,\n"
	       "                           0 never)\n"
	       "    --cache-dir DIR        keep pulled chunks in DIR too; a\n"
	       "                           later mount reuses those of the same\n"
	       "                           seed generation that match its\n"
	       "                           checksums.  DIR is created 0700; an\n"
	       "                           existing one must be a directory (not\n"
	       "                           a link) of this user's that nobody\n"
	       "                           else can write, under parents only\n"
	       "                           root or this user can change (or\n"
	       "                           sticky, as /tmp)\n"
	       "    --cache-dir-size SIZE  bound on DIR (default: none but the\n"
	       "                           filesystem's); older generations\n"
	       "                           go first\n"
	       "    --chunk-size SIZE      bytes per pull, power of two\n"
	       "                           (default 1M)\n"
	       "    --read-ahead-kb N      kernel read-ahead for the mount\n"
	       "                           (default 16384; 0 keeps the kernel's)\n"
	       "    --max-background N     FUSE requests the kernel keeps in\n"
	       "                           flight (default 32)\n"
	       "    --max-models N         show at most N models at once\n"
	       "                           (default 1024); one source brings\n"
	       "                           in at most a quarter of them (and\n"
	       "                           at most 256); more are refused, said\n"
	       "                           once a minute per source\n"
	       "    --no-verify            serve pulled bytes without checking\n"
	       "                           them against the seed's checksums\n"
	       "                           (then only from seeds, never from\n"
	       "                           re-seeders; not with --reseed)\n"
	       "    --ahead SIZE           pull up to SIZE ahead of a sequential\n"
	       "                           reader, and of a read in a\n"
	       "                           safetensors tensor up to the tensor's\n"
	       "                           end (default 64M, at most a quarter\n"
	       "                           of the cache; 0: off)\n"
	       "    --no-tensor-ahead      only sequential readers get read-ahead\n"
	       "    --require K=V[,K=V...] show a model only while its identity\n"
	       "                           matches (keys: model, revision,\n"
	       "                           generation, dtype, quant, layout,\n"
	       "                           layout_version, tp_size, tp_rank,\n"
	       "                           pp_size, pp_rank, ep_size, ep_rank,\n"
	       "                           framework); .seedfs/status says\n"
	       "                           what differs\n"
	       "    --prefetch             once mounted, warm the cache with\n"
	       "                           every file in the background (see\n"
	       "                           seedfs prefetch); with --reseed, from\n"
	       "                           a point of its own, so replicas\n"
	       "                           started together pull different\n"
	       "                           chunks from the seeds\n"
	       "    --reseed               also serve what this mount holds to\n"
	       "                           other replicas (remote read only):\n"
	       "                           it announces itself to its seeds,\n"
	       "                           and replicas told only a seed's\n"
	       "                           address read from it too\n"
	       "    --listen HOST:PORT     with --reseed, its control port\n"
	       "                           (default 0.0.0.0:0 with a token,\n"
	       "                           else 127.0.0.1:0; any port); it\n"
	       "                           asks for the same token\n"
	       "    --grace SECONDS        with --reseed: when its token file\n"
	       "                           holds a new token, its cache is\n"
	       "                           registered again under a new key\n"
	       "                           and the old key reads this long\n"
	       "                           (default 60; 0: revoked at once)\n"
	       "    --test-corrupt-slab    tests only: with --reseed, serve\n"
	       "                           others wrong bytes (a hostile peer)\n"
	       "    --test-verify-delay MS tests only: every pulled chunk waits\n"
	       "                           this long before it is checked\n"
	       "    --tls-cert FILE        a PEM certificate and key for this\n"
	       "    --tls-key FILE         mount's own ports: with --reseed and\n"
	       "                           TLS, its control port; with\n"
	       "                           --metrics-listen, the metrics port\n"
	       "                           speaks TLS only\n"
	       "    --metrics-listen HOST:PORT  also answer GET /metrics\n"
	       "                           (Prometheus text, as .seedfs/metrics)\n"
	       "                           there, behind the token when one is\n"
	       "                           given; off loopback without TLS, a\n"
	       "                           token would cross in clear: warned\n"
	       "    --metrics-token-file FILE  a read-only scrape token (one\n"
	       "                           line, as --token-file): it opens GET\n"
	       "                           /metrics and nothing else\n"
	       "    -o nonempty            mount over a directory that is not\n"
	       "                           empty (refused otherwise)\n"
	       "    -o direct_io           model files bypass the page cache:\n"
	       "                           every read comes from the mount's\n"
	       "                           cache, one copy fewer; mmap of them\n"
	       "                           fails (ENODEV) with this libfuse\n"
	       "    --log-level LEVEL      err, warn, info, debug (default info)\n"
	       "    --log-file FILE        log here; default: stderr with -f,\n"
	       "                           syslog in the background\n"
	       "    --log-format FORMAT    text (default) or json: one object\n"
	       "                           a line (time, program, pid, level,\n"
	       "                           subsystem, msg); syslog stays text\n"
	       "    -h, --help             this text\n"
	       "    -V, --version          version\n"
	       "\n",
	       cli_sec_help, names);
	fuse_cmdline_help();
	fuse_lowlevel_help();
}

/* Parse an optional numeric option; one line on stderr when invalid. */
static int num_opt(const char *val, const char *name,
		   int (*parse)(const char *, uint64_t *), uint64_t lo,
		   uint64_t hi, uint64_t *out)
{
	if (!val)
		return 0;
	if (parse(val, out) || *out < lo || *out > hi) {
		fprintf(stderr, "seedfs mount: invalid value '%s' for %s\n",
			val, name);
		return -EINVAL;
	}
	return 0;
}

/* Memory the mount needs besides its cache (threads, tree, libfabric,
 * measured: 40-60 MiB of RSS with a 64 MiB cache). */
#define MOUNT_OVERHEAD (64ull << 20)

/* sfs_mem_default_cache of this machine's RAM. */
static uint64_t default_cache_size(const struct sfs_mem_room *room)
{
	long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
	uint64_t ram =
		pages > 0 && psz > 0 ? (uint64_t)pages * (uint64_t)psz : 0;
	return sfs_mem_default_cache(ram, room);
}

/* A cache the machine or the cgroup cannot hold is refused now, in one
 * line, rather than OOM-killed later with no word. */
static int check_room(uint64_t cache, const struct sfs_mem_room *r,
		      const char *asked)
{
	char b1[32], b2[32], b3[32];
	if (cache + MOUNT_OVERHEAD <= r->available)
		return 0;
	uint64_t fit =
		r->available > MOUNT_OVERHEAD + (16u << 20)
			? (r->available - MOUNT_OVERHEAD) & ~((1ull << 20) - 1)
			: 0;
	if (r->cgroup <= r->machine)
		fprintf(stderr,
			"seedfs mount: --cache-size %s is more than this "
			"mount can have: its cgroup %s allows %s (%s) and %s "
			"of it is free; use --cache-size %lluM or less\n",
			asked, r->cg_path,
			sfs_fmt_bytes(r->cg_limit, b1, sizeof(b1)), r->cg_file,
			sfs_fmt_bytes(r->cgroup, b2, sizeof(b2)),
			(unsigned long long)(fit >> 20));
	else
		fprintf(stderr,
			"seedfs mount: --cache-size %s is more than this "
			"machine can give: %s available (MemAvailable); "
			"use --cache-size %lluM or less\n",
			asked, sfs_fmt_bytes(r->machine, b3, sizeof(b3)),
			(unsigned long long)(fit >> 20));
	return -ENOMEM;
}

/*
 * --metrics-listen: its scrape token (refused when it is the fleet
 * token: a scraper would read every model), and a warning when a token
 * would cross the network in clear.  Warned, not refused: the seed's
 * own port takes a token without TLS too, on networks one trusts, and
 * refusing would stop every mount upgraded with such a command line.
 */
static int metrics_opts(const struct mount_opts *o, struct mount_cfg *c)
{
	char h[256], pt[16], err[512];
	struct sfs_auth *fleet = sfs_control_cred_auth(c->cred);

	c->metrics_listen = o->metrics_listen;
	if (!o->metrics_listen)
		return 0;
	if (o->metrics_token_file &&
	    sfs_auth_load(o->metrics_token_file, "--metrics-token-file",
			  &c->metrics_auth, err, sizeof(err))) {
		cli_err("seedfs mount", err);
		return -EINVAL;
	}
	if (c->metrics_auth && fleet && sfs_auth_same(c->metrics_auth, fleet)) {
		fprintf(stderr,
			"seedfs mount: --metrics-token-file %s holds the token "
			"of --token-file: a scraper would read every model; "
			"give it a token of its own\n",
			o->metrics_token_file);
		return -EINVAL;
	}
	if (sfs_parse_hostport(o->metrics_listen, h, sizeof(h), pt,
			       sizeof(pt)) ||
	    !*pt) {
		fprintf(stderr,
			"seedfs mount: --metrics-listen '%s' is not HOST:PORT\n",
			o->metrics_listen);
		return -EINVAL;
	}
	if ((fleet || c->metrics_auth) && !c->tls && !sfs_ctlsrv_loopback(h))
		fprintf(stderr,
			"seedfs mount: warning: --metrics-listen %s without "
			"TLS: every scrape sends its token in clear; give "
			"--tls-cert and --tls-key%s (docs/metrics.md)\n",
			o->metrics_listen,
			c->metrics_auth ? ""
					: ", and --metrics-token-file so that "
					  "scrapers do not hold the fleet "
					  "token");
	return 0;
}

static int resolve(const struct mount_opts *o, struct mount_cfg *c)
{
	uint64_t v;
	c->protocol = sfs_xport_choose(o->protocol, getenv("SEEDFS_PROTOCOL"));
	/* auto on a replica: whatever the seed serves. */
	if (c->protocol && !strcmp(c->protocol, SFS_XPORT_AUTO))
		c->protocol = NULL;
	struct sfs_mem_room room;
	sfs_mem_room(&room, NULL, NULL);
	c->timeout_ms = 10000;
	c->cache_size = default_cache_size(&room);
	c->chunk_size = 1u << 20;
	c->read_ahead_kb = 16384;
	c->max_background = 32; /* kernel default 12; 32 measured faster */
	c->registry = (struct sfs_reg_cfg){.url = o->registry,
					   .ca_file = o->registry_ca,
					   .auth_file = o->registry_auth_file};
	if (!c->seeds.n && !o->registry) {
		fprintf(stderr, "seedfs mount: --seed HOST:PORT or --registry "
				"etcd://HOST:PORT is required (seedfs mount "
				"--help)\n");
		return -EINVAL;
	}
	if (!o->registry && (o->registry_ca || o->registry_auth_file)) {
		fprintf(stderr, "seedfs mount: --registry-ca and "
				"--registry-auth-file are for --registry\n");
		return -EINVAL;
	}
	if (num_opt(o->timeout, "--timeout", sfs_parse_u64, 1, 3600, &v))
		return -EINVAL;
	if (o->timeout)
		c->timeout_ms = (unsigned int)v * 1000;
	if (num_opt(o->cache_size, "--cache-size", sfs_parse_size, 16u << 20,
		    1ull << 42, &v))
		return -EINVAL;
	if (o->cache_size)
		c->cache_size = v;
	if (check_room(c->cache_size, &room,
		       o->cache_size ? o->cache_size : "(the default)"))
		return -ENOMEM;
	c->cache_dir = o->cache_dir;
	if (num_opt(o->cache_idle, "--cache-idle", sfs_parse_u64, 0, 86400, &v))
		return -EINVAL;
	c->cache_idle_ms = o->cache_idle ? (unsigned int)v * 1000
					 : SFS_REPLICA_CACHE_IDLE_MS;
	if (num_opt(o->cache_dir_size, "--cache-dir-size", sfs_parse_size,
		    64u << 20, 1ull << 50, &c->cache_dir_size))
		return -EINVAL;
	if (c->cache_dir && !*c->cache_dir) {
		fprintf(stderr, "seedfs mount: --cache-dir is empty\n");
		return -EINVAL;
	}
	if (num_opt(o->chunk_size, "--chunk-size", sfs_parse_size, 4096,
		    64u << 20, &v))
		return -EINVAL;
	if (o->chunk_size) {
		if (v & (v - 1)) {
			fprintf(stderr,
				"seedfs mount: --chunk-size %s is not "
				"a power of two\n",
				o->chunk_size);
			return -EINVAL;
		}
		c->chunk_size = (uint32_t)v;
	}
	if (num_opt(o->read_ahead_kb, "--read-ahead-kb", sfs_parse_u64, 0,
		    1u << 20, &v))
		return -EINVAL;
	if (o->read_ahead_kb)
		c->read_ahead_kb = (unsigned int)v;
	if (num_opt(o->max_background, "--max-background", sfs_parse_u64, 0,
		    65535, &v))
		return -EINVAL;
	if (o->max_background)
		c->max_background = (unsigned int)v;
	if (num_opt(o->max_models, "--max-models", sfs_parse_u64, 1, 1000000,
		    &v))
		return -EINVAL;
	if (o->max_models)
		c->max_models = (size_t)v;
	c->no_verify = o->no_verify;
	/* Unchecked bytes only from the seeds themselves: a re-seeder
	 * (anyone with the token can be one) could serve anything. */
	if (o->no_verify && o->reseed) {
		fprintf(stderr, "seedfs mount: --no-verify cannot go with "
				"--reseed: a re-seeder's bytes are always "
				"checked\n");
		return -EINVAL;
	}
	if (o->no_verify && o->trust_key) {
		fprintf(stderr, "seedfs mount: --no-verify cannot go with "
				"--trust-key: signed digests are there to be "
				"checked\n");
		return -EINVAL;
	}
	if (o->listen && !o->reseed) {
		fprintf(stderr, "seedfs mount: --listen is for --reseed\n");
		return -EINVAL;
	}
	if ((o->tls_cert || o->tls_key) && !o->reseed && !o->metrics_listen) {
		fprintf(stderr, "seedfs mount: --tls-cert and --tls-key are "
				"for --reseed and --metrics-listen\n");
		return -EINVAL;
	}
	if (!o->tls_cert != !o->tls_key) {
		fprintf(stderr, "seedfs mount: --tls-cert and --tls-key go "
				"together\n");
		return -EINVAL;
	}
	if (o->metrics_token_file && !o->metrics_listen) {
		fprintf(stderr, "seedfs mount: --metrics-token-file is for "
				"--metrics-listen\n");
		return -EINVAL;
	}
	struct cli_sec sec = {.token_file = o->token_file,
			      .tls_ca = o->tls_ca,
			      .tls_pin = o->tls_pin,
			      .trust_key = o->trust_key};
	if (cli_cred(&sec, &c->seeds, "seedfs mount", &c->cred))
		return -EINVAL;
	if (o->tls_cert) {
		char err[512];
		if (sfs_tls_pair_load(o->tls_cert, o->tls_key, &c->tls, err,
				      sizeof(err))) {
			cli_err("seedfs mount", err);
			return -EINVAL;
		}
	}
	if (metrics_opts(o, c))
		return -EINVAL;
	if (o->reseed) {
		char h[256], pt[16];
		int token = sfs_control_cred_auth(c->cred) != NULL;
		c->reseed = o->listen ? o->listen
			    : token   ? "0.0.0.0:0"
				      : "127.0.0.1:0";
		if (sfs_parse_hostport(c->reseed, h, sizeof(h), pt,
				       sizeof(pt)) ||
		    !*pt) {
			fprintf(stderr,
				"seedfs mount: --listen '%s' is not HOST:PORT\n",
				c->reseed);
			return -EINVAL;
		}
		if (!token && !sfs_ctlsrv_loopback(h))
			fprintf(stderr,
				"seedfs mount: warning: --reseed --listen %s "
				"without --token-file: whoever reaches it reads "
				"what this mount holds (docs/security.md)\n",
				c->reseed);
		if (sfs_control_cred_tls(c->cred) && !o->tls_cert) {
			fprintf(stderr,
				"seedfs mount: --reseed over TLS needs "
				"--tls-cert and --tls-key for its own control "
				"port\n");
			return -EINVAL;
		}
	}
	c->prefetch = o->prefetch;
	c->no_tensor_ahead = o->no_tensor_ahead;
	c->direct_io = o->direct_io;
	c->ahead = 64u << 20;
	if (num_opt(o->ahead, "--ahead", sfs_parse_size, 0, 1ull << 40, &v))
		return -EINVAL;
	if (o->ahead)
		c->ahead = v;
	c->reseed_grace_s = 60;
	if (num_opt(o->grace, "--grace", sfs_parse_u64, 0, 86400, &v))
		return -EINVAL;
	if (o->grace && !o->reseed) {
		fprintf(stderr, "seedfs mount: --grace is for --reseed\n");
		return -EINVAL;
	}
	if (o->grace)
		c->reseed_grace_s = (uint32_t)v;
	c->test_corrupt_slab = o->test_corrupt_slab;
	if (num_opt(o->test_verify_delay, "--test-verify-delay", sfs_parse_u64,
		    0, 60000, &v))
		return -EINVAL;
	c->test_verify_delay_ms = o->test_verify_delay ? (unsigned int)v : 0;
	if (o->require) {
		char err[512];
		if (sfs_require_parse(o->require, &c->require, err,
				      sizeof(err))) {
			cli_err("seedfs mount", err);
			return -EINVAL;
		}
		c->require_text = o->require;
	}
	if (c->protocol && !sfs_xport_known(c->protocol, NULL, 0)) {
		char names[128];
		sfs_xport_known(NULL, names, sizeof(names));
		fprintf(stderr,
			"seedfs mount: unknown protocol '%s'; known: "
			"%s\n",
			c->protocol, names);
		return -EINVAL;
	}
	return 0;
}

/* Open the replica, then serve it; in the background child, the parent
 * waits on @ready_fd for the verdict. */
static int serve(const struct mount_cfg *c, struct fuse_args *args,
		 struct fuse_cmdline_opts *cmd, const char *log_file,
		 int ready_fd)
{
	struct sfs_replica_cfg rc = {
		.seeds = (const char *const *)c->seeds.list,
		.nseeds = c->seeds.n,
		.protocol = c->protocol,
		.timeout_ms = c->timeout_ms,
		.cache_size = c->cache_size,
		.chunk_size = c->chunk_size,
		.cache_dir = c->cache_dir,
		.cache_dir_size = c->cache_dir_size,
		.cache_idle_ms = c->cache_idle_ms,
		.no_verify = c->no_verify,
		.require = c->require,
		.require_text = c->require_text,
		.layout = sfs_require_value(c->require, "layout"),
		.start_ms = c->start_ms,
		.who = "seedfs mount",
		.reseed = c->reseed,
		.hold_all = c->direct_io,
		.reseed_grace_s = c->reseed_grace_s,
		.reseed_test_corrupt = c->test_corrupt_slab,
		.test_verify_delay_ms = c->test_verify_delay_ms,
		.cred = c->cred,
		.reseed_tls = c->reseed ? c->tls : NULL,
		.metrics_listen = c->metrics_listen,
		.metrics_auth = c->metrics_auth,
		.metrics_tls = c->metrics_listen ? c->tls : NULL,
		.max_models = c->max_models};
	struct sfs_serve_cfg sc = {.read_ahead_kb = c->read_ahead_kb,
				   .max_background = c->max_background,
				   .prefetch = c->prefetch,
				   .direct_io = c->direct_io,
				   .ready_fd = ready_fd,
				   .log_file = log_file};
	struct sfs_replica *r;
	struct sfs_reg *reg = NULL;
	char err[SFS_XPORT_ERR_MAX] = "";

	if ((c->registry.url &&
	     sfs_reg_open(&c->registry, &reg, err, sizeof(err))) ||
	    (rc.registry = reg, sfs_replica_open(&rc, &r, err, sizeof(err)))) {
		sfs_reg_free(reg);
		cli_err("seedfs mount", err);
		if (ready_fd >= 0) {
			char f = 'F';
			if (write(ready_fd, &f, 1) != 1)
				SFS_LOG(SFS_WARN, "mount",
					"cannot signal the parent");
			close(ready_fd);
		}
		return 1;
	}
	/* The token and the manifests' keys out of core dumps; a
	 * re-seeder serves with the protocol it reads with. */
	cli_no_dumps("mount", c->reseed ? sfs_replica_protocol(r) : NULL);
	uint64_t ra_max = SFS_MIN(c->ahead, c->cache_size / 4);
	sfs_replica_set_ahead(r, SFS_MIN(4ull * c->chunk_size, ra_max), ra_max,
			      !c->no_tensor_ahead);
	int status = sfs_fs_serve(r, args, cmd, &sc);
	sfs_replica_close(r);
	sfs_reg_free(reg);
	return status;
}

/* fuse_opt_parse: note the mount point (the first argument that is not
 * an option) and leave everything else to libfuse. */
static int keep_mountpoint(void *data, const char *arg, int key,
			   struct fuse_args *outargs)
{
	struct mount_opts *o = data;
	if (key == FUSE_OPT_KEY_NONOPT && !o->mnt && !(o->mnt = strdup(arg)))
		return -1;
	return 1;
}

int sfs_cli_mount(int argc, char **argv)
{
	char **jargv = join_values(argc, argv);
	int jargc = 0;
	while (jargv && jargv[jargc])
		jargc++;
	struct fuse_args args = FUSE_ARGS_INIT(jargc, jargv);
	struct fuse_cmdline_opts cmd;
	struct mount_opts o;
	struct mount_cfg c;
	int rc = 2;

	memset(&o, 0, sizeof(o));
	memset(&c, 0, sizeof(c));
	memset(&cmd, 0, sizeof(cmd));
	c.start_ms = sfs_now_ms();
	if (!jargv) {
		fprintf(stderr, "seedfs mount: out of memory\n");
		goto out;
	}
	if (fuse_opt_parse(&args, &o, mount_spec, keep_mountpoint) == -1)
		goto out;
	if (o.help) {
		usage();
		rc = 0;
		goto out;
	}
	if (o.version) {
		printf("seedfs %s, FUSE library %s\n", SEEDFS_VERSION,
		       fuse_pkgversion());
		rc = 0;
		goto out;
	}
	if (o.log_level && sfs_log_set_level(o.log_level)) {
		fprintf(stderr, "seedfs mount: invalid --log-level '%s'\n",
			o.log_level);
		goto out;
	}
	if (o.log_format && sfs_log_set_format(o.log_format)) {
		fprintf(stderr,
			"seedfs mount: invalid --log-format '%s' (text or "
			"json)\n",
			o.log_format);
		goto out;
	}
	if (o.log_file) {
		int lrc = sfs_log_to_file(o.log_file);
		if (lrc) {
			fprintf(stderr, "seedfs mount: --log-file %s: %s\n",
				o.log_file, strerror(-lrc));
			goto out;
		}
	}
	if (o.seed && cli_seeds_add(&c.seeds, o.seed, "seedfs mount"))
		goto out;
	if (resolve(&o, &c))
		goto out;
	if (!o.mnt) {
		fprintf(stderr, "seedfs mount: MOUNTPOINT is required "
				"(seedfs mount --help)\n");
		goto out;
	}
	/* Before anything starts: a wrong place is one line.  (A dead
	 * mount must go before libfuse resolves the path.) */
	char perr[600], note[600];
	if (sfs_mnt_preflight(o.mnt, o.nonempty, perr, sizeof(perr), note,
			      sizeof(note))) {
		cli_err("seedfs mount", perr);
		goto out;
	}
	if (*note) {
		cli_err("seedfs mount", note);
		SFS_LOG(SFS_INFO, "mount", "%s", note);
	}
	if (fuse_parse_cmdline(&args, &cmd) != 0)
		goto out;
	if (!cmd.mountpoint) {
		fprintf(stderr, "seedfs mount: MOUNTPOINT is required "
				"(seedfs mount --help)\n");
		goto out;
	}
	/* Read-only, named after the seed, visible as seedfs in mount(8). */
	/* Commas separate -o options: the seeds' are escaped. */
	char fsname[1200], seeds[900];
	size_t k = 0;
	const char *named = c.seeds.n ? c.seeds.text : o.registry;
	for (const char *p = named; *p && k + 3 < sizeof(seeds); p++) {
		if (*p == ',')
			seeds[k++] = '\\';
		seeds[k++] = *p;
	}
	seeds[k] = '\0';
	snprintf(fsname, sizeof(fsname),
		 "-oro,default_permissions,subtype=seedfs,fsname=seedfs@%s",
		 seeds);
	if (fuse_opt_add_arg(&args, fsname) ||
	    (cmd.debug && fuse_opt_add_arg(&args, "-odebug")))
		goto out;
	if (sfs_control_init()) {
		fprintf(stderr, "seedfs mount: cannot initialize libcurl\n");
		goto out;
	}

	/* Every fabric endpoint listens: room for the caps' reserve of
	 * open files (transports/fabcap.c). */
	sfs_raise_nofile();
	if (cmd.foreground) {
		rc = serve(&c, &args, &cmd, o.log_file, -1);
		goto out;
	}
	/* Background: the child does the work; we wait for its verdict. */
	int pfd[2];
	if (pipe2(pfd, O_CLOEXEC)) {
		perror("seedfs mount: pipe");
		goto out;
	}
	pid_t pid = fork();
	if (pid < 0) {
		perror("seedfs mount: fork");
		goto out;
	}
	if (pid == 0) {
		close(pfd[0]);
		setsid();
		rc = serve(&c, &args, &cmd, o.log_file, pfd[1]);
		goto out;
	}
	close(pfd[1]);
	char st = 0;
	ssize_t n;
	while ((n = read(pfd[0], &st, 1)) < 0 && errno == EINTR)
		;
	close(pfd[0]);
	rc = (n == 1 && st == 'R') ? 0 : 1;
out:
	free(cmd.mountpoint);
	fuse_opt_free_args(&args);
	for (int j = 0; j < jargc; j++)
		free(jargv[j]);
	free(jargv);
	free(o.seed);
	cli_seeds_free(&c.seeds);
	free(o.protocol);
	free(o.timeout);
	free(o.cache_size);
	free(o.cache_dir);
	free(o.cache_dir_size);
	free(o.cache_idle);
	free(o.chunk_size);
	free(o.read_ahead_kb);
	free(o.max_background);
	free(o.max_models);
	free(o.ahead);
	free(o.require);
	free(o.listen);
	free(o.registry);
	free(o.registry_ca);
	free(o.registry_auth_file);
	free(o.token_file);
	free(o.tls_ca);
	free(o.tls_pin);
	free(o.trust_key);
	free(o.grace);
	free(o.test_verify_delay);
	free(o.tls_cert);
	free(o.tls_key);
	free(o.metrics_listen);
	free(o.metrics_token_file);
	sfs_control_cred_free(c.cred);
	sfs_auth_free(c.metrics_auth);
	sfs_tls_pair_free(c.tls);
	free(o.mnt);
	sfs_require_free(c.require);
	free(o.log_level);
	free(o.log_file);
	free(o.log_format);
	return rc;
}
