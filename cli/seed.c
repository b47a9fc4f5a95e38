/* SPDX-License-Identifier: MIT */
/* seed_main.c - the `seedfs seed` command line. */
#include "cli/cli.h"
#include "seed/announce.h"
#include "seed/seed.h"
#include "seed/register.h"

#include "control/auth.h"
#include "control/control.h"
#include "control/ctlsrv.h"
#include "control/registry.h"
#include "control/sign.h"
#include "control/tls.h"

#include "common/log.h"
#include "common/notify.h"
#include "common/util.h"
#include "transports/transport.h"

#include <errno.h>
#include <stdint.h>
#include <getopt.h>
#include <pthread.h>
#include <ftw.h>
#include <poll.h>
#include <signal.h>
#include <sys/inotify.h>
#include <sys/signalfd.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *out)
{
	char names[128];
	sfs_xport_known(NULL, names, sizeof(names));
	fprintf(out,
		"usage: seedfs seed --model-dir [NAME=]DIR [--model-dir ...] "
		"[options]\n"
		"\n"
		"Publish the model in DIR: validate its safetensors files,\n"
		"register them read-only with the fabric and serve the\n"
		"manifest on the control port.  Prints a line containing\n"
		"'ready' when serving; SIGHUP publishes the next generation;\n"
		"SIGINT or SIGTERM stop it.\n"
		"\n"
		"Only directories and regular files are published.  Symbolic\n"
		"links are followed when they resolve inside DIR, or, when DIR\n"
		"is a Hugging Face cache snapshot (REPO/snapshots/REV), to a\n"
		"file in REPO/blobs; any other link is skipped in one line\n"
		"naming it and its target.  A file is opened without following\n"
		"links and only if it is still the one the walk saw: one\n"
		"changed in between (renamed over, made a link or a FIFO) is\n"
		"refused in one line, and that generation is not published.\n"
		"\n"
		"options:\n"
		"  --model-dir [NAME=]DIR  a model directory to publish\n"
		"                       (required); give it again for more\n"
		"                       models (an engine's compile caches\n"
		"                       beside its weights), each its own\n"
		"                       directory NAME in a mount (default:\n"
		"                       DIR's basename)\n"
		"  --name NAME          the model's name, with one --model-dir\n"
		"  --token-file FILE    the shared secret every control route\n"
		"                       but /v1/health asks for (Authorization:\n"
		"                       Bearer); one line, e.g. openssl rand\n"
		"                       -hex 32; SIGHUP reads it again\n"
		"                       (default $SEEDFS_TOKEN_FILE; none: the\n"
		"                       seed is unauthenticated)\n"
		"  --metrics-token-file FILE  a read-only scrape token (same\n"
		"                       format): it opens GET /metrics and\n"
		"                       nothing else (the --token-file token\n"
		"                       opens /metrics too); SIGHUP reads it\n"
		"                       again\n"
		"  --tls-cert FILE      serve the control port over TLS with\n"
		"                       this PEM certificate (chain)\n"
		"  --tls-key FILE       and this PEM private key\n"
		"  --listen HOST:PORT   control port (default 0.0.0.0:7070 with\n"
		"                       a token, else 127.0.0.1:7070; port 0\n"
		"                       picks a free one)\n"
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
		"  --checksum-chunk SIZE  publish an XXH3-64 per SIZE bytes of\n"
		"                       every file (power of two, default 1M;\n"
		"                       0: none)\n"
		"  --digest sha256|xxh3 sha256 (default): a SHA-256 of each of\n"
		"                       those chunks too: a replica checks\n"
		"                       what a re-seeder serves with it, so no\n"
		"                       re-seeder can forge a chunk; xxh3: the\n"
		"                       fast-only mode (XXH3-64 alone: replicas\n"
		"                       read its files from seeds only)\n"
		"  --sign-key FILE      sign every manifest with this Ed25519\n"
		"                       private key (PEM, mode 0600: openssl\n"
		"                       genpkey -algorithm ed25519); replicas\n"
		"                       pin its public key with --trust-key\n"
		"  --sign-validity TIME  a signature holds this long (SECONDS,\n"
		"                       or a number and s, m, h or d; default\n"
		"                       24h, 10s to 366d); every generation\n"
		"                       served is signed again at half of it,\n"
		"                       and replicas refuse a lapsed one\n"
		"  --watch              publish a new generation of a model when\n"
		"                       its directory changes (all of them on\n"
		"                       SIGHUP)\n"
		"  --grace SECONDS      a superseded generation stays served\n"
		"                       this long, and so do the old keys\n"
		"                       after a token rotation (default 60)\n"
		"  --fleet-from N       with N or more re-seeders live, each\n"
		"                       is told its place in the fleet's\n"
		"                       lanes and given its log2(N) peers\n"
		"                       (default 9: more than a replica's 8\n"
		"                       peers; 2 to 1024, the most re-seeders\n"
		"                       a seed lists)\n"
		"  --announce-per-host N  list at most N re-seeders announced\n"
		"                       from one address at a time (default\n"
		"                       4); an announcement names only its\n"
		"                       caller's own address\n"
		"  --ring-key-file FILE  order the fleet's ring by this secret\n"
		"                       (one line, e.g. openssl rand -hex 32;\n"
		"                       not the token): seeds given the same\n"
		"                       file give re-seeders the same places\n"
		"                       (default: 32 random bytes drawn at\n"
		"                       start)\n"
		"  --revoke-now         a token rotation (SIGHUP with a new\n"
		"                       token) revokes the old keys at once,\n"
		"                       not after --grace: for an incident\n"
		"  --identity K=V[,K=V...]  what the model is, over what its\n"
		"                       config.json says (torch_dtype,\n"
		"                       quantization_config): revision, dtype,\n"
		"                       quant, layout, layout_version,\n"
		"                       tp_size, tp_rank, pp_size, pp_rank,\n"
		"                       ep_size, ep_rank, framework\n"
		"                       (docs/identity.md)\n"
		"  --timeout SECONDS    bound on transport waits (default 10)\n"
		"  --registry etcd://HOST:PORT[,HOST:PORT...][/PREFIX]\n"
		"                       record every model in this etcd under\n"
		"                       a lease, so mounts find the seed and\n"
		"                       forget it when it dies (etcds://: TLS;\n"
		"                       docs/registry.md)\n"
		"  --registry-ca FILE   with etcds://, the CA that signed etcd's\n"
		"                       certificate (default: the system's)\n"
		"  --registry-auth-file FILE  USER:PASSWORD for etcd, on the\n"
		"                       file's first line\n"
		"  --registry-ttl SECONDS  the lease (default 10, renewed every\n"
		"                       third of it)\n"
		"  --advertise HOST[:PORT]  the control address recorded in the\n"
		"                       registry (default: the --listen host,\n"
		"                       or, listening on every address, the\n"
		"                       address it reaches etcd from; the bound\n"
		"                       port)\n"
		"  --test-corrupt FILE:OFFSET  tests only: flip that published\n"
		"                       byte after checksumming\n"
		"  --test-sign-clock SECONDS  tests only: sign as if the clock\n"
		"                       read SECONDS later (negative: earlier)\n"
		"  --test-after-walk FILE  tests only: after walking a model\n"
		"                       directory, wait (10 s at most) for FILE\n"
		"                       to appear, and remove it, before opening\n"
		"                       the files\n"
		"  --log-level LEVEL    err, warn, info, debug (default info)\n"
		"  --log-file FILE      log here instead of stderr\n"
		"  --log-format FORMAT  text (default) or json: one object a\n"
		"                       line (time, program, pid, level,\n"
		"                       subsystem, msg) for log shippers\n"
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
	OPT_GRACE,
	OPT_FLEET_FROM,
	OPT_WATCH,
	OPT_IDENTITY,
	OPT_REGISTRY,
	OPT_REGISTRY_CA,
	OPT_REGISTRY_AUTH,
	OPT_REGISTRY_TTL,
	OPT_ADVERTISE,
	OPT_TOKEN_FILE,
	OPT_LOG_FORMAT,
	OPT_TLS_CERT,
	OPT_TLS_KEY,
	OPT_REVOKE_NOW,
	OPT_DIGEST,
	OPT_SIGN_KEY,
	OPT_SIGN_VALIDITY,
	OPT_TEST_SIGN_CLOCK,
	OPT_TEST_AFTER_WALK,
	OPT_METRICS_TOKEN_FILE,
	OPT_ANNOUNCE_PER_HOST,
	OPT_RING_KEY_FILE,
};

static const struct option long_opts[] = {
	{"model-dir", required_argument, NULL, OPT_MODEL_DIR},
	{"name", required_argument, NULL, OPT_NAME},
	{"listen", required_argument, NULL, OPT_LISTEN},
	{"token-file", required_argument, NULL, OPT_TOKEN_FILE},
	{"metrics-token-file", required_argument, NULL, OPT_METRICS_TOKEN_FILE},
	{"tls-cert", required_argument, NULL, OPT_TLS_CERT},
	{"tls-key", required_argument, NULL, OPT_TLS_KEY},
	{"protocol", required_argument, NULL, OPT_PROTOCOL},
	{"fabric-addr", required_argument, NULL, OPT_FABRIC_ADDR},
	{"inline-max", required_argument, NULL, OPT_INLINE_MAX},
	{"mr-max", required_argument, NULL, OPT_MR_MAX},
	{"timeout", required_argument, NULL, OPT_TIMEOUT},
	{"log-level", required_argument, NULL, OPT_LOG_LEVEL},
	{"log-file", required_argument, NULL, OPT_LOG_FILE},
	{"log-format", required_argument, NULL, OPT_LOG_FORMAT},
	{"checksum-chunk", required_argument, NULL, OPT_CHECKSUM_CHUNK},
	{"test-corrupt", required_argument, NULL, OPT_TEST_CORRUPT},
	{"test-after-walk", required_argument, NULL, OPT_TEST_AFTER_WALK},
	{"grace", required_argument, NULL, OPT_GRACE},
	{"fleet-from", required_argument, NULL, OPT_FLEET_FROM},
	{"announce-per-host", required_argument, NULL, OPT_ANNOUNCE_PER_HOST},
	{"ring-key-file", required_argument, NULL, OPT_RING_KEY_FILE},
	{"revoke-now", no_argument, NULL, OPT_REVOKE_NOW},
	{"digest", required_argument, NULL, OPT_DIGEST},
	{"sign-key", required_argument, NULL, OPT_SIGN_KEY},
	{"sign-validity", required_argument, NULL, OPT_SIGN_VALIDITY},
	{"test-sign-clock", required_argument, NULL, OPT_TEST_SIGN_CLOCK},
	{"watch", no_argument, NULL, OPT_WATCH},
	{"identity", required_argument, NULL, OPT_IDENTITY},
	{"registry", required_argument, NULL, OPT_REGISTRY},
	{"registry-ca", required_argument, NULL, OPT_REGISTRY_CA},
	{"registry-auth-file", required_argument, NULL, OPT_REGISTRY_AUTH},
	{"registry-ttl", required_argument, NULL, OPT_REGISTRY_TTL},
	{"advertise", required_argument, NULL, OPT_ADVERTISE},
	{"help", no_argument, NULL, 'h'},
	{NULL, 0, NULL, 0},
};

/* The seed's records in the registry (--registry), or NULL. */
static struct sfs_seed_reg *seedreg;
/* The control port's token (--token-file), or NULL. */
static struct sfs_auth *seed_auth;
/* The scrape token (--metrics-token-file), or NULL. */
static struct sfs_auth *scrape_auth;

/* How long the keys of a rotated token keep reading (--grace, 0 with
 * --revoke-now). */
static uint32_t rekey_grace_s;

/* SIGHUP: a token file is read again (rotation); a bad one leaves the
 * old token in force.  1 when it holds a new one. */
static int reread(struct sfs_auth *a, const char *what)
{
	char err[SFS_XPORT_ERR_MAX];
	int changed = 0;
	if (!a)
		return 0;
	if (sfs_auth_reload(a, &changed, err, sizeof(err)))
		SFS_LOG(SFS_ERR, "seed", "SIGHUP: the old %s stays: %s", what,
			err);
	else
		SFS_LOG(SFS_INFO, "seed", "SIGHUP: %s read again from %s%s",
			what, sfs_auth_path(a),
			changed ? ": a new one, the old one is refused from now"
				: " (unchanged)");
	return changed;
}

/* SIGHUP: the tokens again.  A new fleet token is a new key epoch:
 * every region is registered again (sfs_seed_rekey), so a manifest
 * fetched with the old token stops reading once the grace ends. */
/* The token changes the keys are registered under (sfs_auth_changes
 * at the last re-key that worked): a re-key that failed is tried again
 * until it works, or the old keys would read for ever. */
static uint64_t rekeyed;
#define REKEY_RETRY_MS 10000

/* A new token not re-keyed yet: re-key.  1 while it is still pending. */
static int rekey_pending(struct sfs_seed *s)
{
	char err[SFS_XPORT_ERR_MAX];
	if (!seed_auth || sfs_auth_changes(seed_auth) == rekeyed)
		return 0;
	uint64_t now = sfs_auth_changes(seed_auth);
	if (sfs_seed_rekey(s, rekey_grace_s, err, sizeof(err))) {
		SFS_LOG(SFS_ERR, "seed",
			"a new token, but the old keys stay (tried again in %d "
			"s): %s",
			REKEY_RETRY_MS / 1000, err);
		return 1;
	}
	rekeyed = now;
	return 0;
}

static void reread_token(struct sfs_seed *s)
{
	reread(seed_auth, "token");
	rekey_pending(s);
	reread(scrape_auth, "scrape token");
}

/* Publish the next generation of model @i (SIZE_MAX: every model); one
 * line on stdout when it is served. */
static void republish(struct sfs_seed *s, size_t i, const char *why)
{
	char err[SFS_XPORT_ERR_MAX], summary[1024];
	int rc = i == SIZE_MAX
			 ? sfs_seed_republish(s, err, sizeof(err))
			 : sfs_seed_republish_model(s, i, err, sizeof(err));
	if (rc == -EALREADY && i != SIZE_MAX) {
		SFS_LOG(SFS_INFO, "seed", "%s: %s: %s", why,
			sfs_seed_model_name(s, i), err);
		return;
	}
	if (rc == -EALREADY) {
		char esc[2 * SFS_XPORT_ERR_MAX];
		printf("seedfs seed: %s (%s)\n",
		       sfs_escape(err, strlen(err), esc, sizeof(esc)), why);
		fflush(stdout);
		sfs_notify_ready(err);
		return;
	}
	if (rc) {
		SFS_LOG(SFS_ERR, "seed",
			"%s: not republished, the current generation is still "
			"served: %s",
			why, err);
		if (i == SIZE_MAX)
			sfs_notify_ready("not republished, the current "
					 "generation is still served");
		return;
	}
	sfs_seed_reg_update(seedreg);
	sfs_seed_summary(s, summary, sizeof(summary));
	printf("seedfs seed: published %s (%s)\n", summary, why);
	fflush(stdout);
	char st[1400];
	snprintf(st, sizeof(st), "published %s (%s)", summary, why);
	sfs_notify_ready(st);
}

/* Watch every directory of a model (again after each republish: new
 * subdirectories); nftw has no argument for the fd. */
static int watch_fd;
static int add_watch(const char *path, const struct stat *st, int type,
		     struct FTW *ftw)
{
	if (type == FTW_D &&
	    inotify_add_watch(watch_fd, path,
			      IN_CLOSE_WRITE | IN_MOVED_TO | IN_MOVED_FROM |
				      IN_CREATE | IN_DELETE | IN_ATTRIB) < 0)
		SFS_LOG(SFS_WARN, "seed", "cannot watch %s: %s", path,
			strerror(errno));
	return 0;
}

static void watch_tree(int fd, const char *dir)
{
	watch_fd = fd;
	nftw(dir, add_watch, 16, FTW_PHYS);
}

#define WATCH_SETTLE_MS 1000 /* quiet time after the last change */
#define WATCH_MAX 64	     /* models watched */

/*
 * The seed's life after ready: SIGHUP republishes every model; with
 * @dirs (--watch), a change to a model's directory republishes that
 * model once it has been quiet for a second (a checkpoint is many
 * writes); a published file that changes on disk is withdrawn at once
 * and its model republished the same way; superseded generations are
 * released when their grace period ends.  SIGINT and SIGTERM end it.
 */
static int serve(struct sfs_seed *s, const sigset_t *set,
		 const char *const *dirs, size_t ndirs)
{
	int sfd = signalfd(-1, set, SFD_CLOEXEC);
	int wfd[WATCH_MAX];
	uint64_t settle_at = 0, dirty = 0, file_dirty = 0;
	struct pollfd p[2 + WATCH_MAX];

	if (sfd < 0) {
		SFS_LOG(SFS_ERR, "seed", "signalfd: %s", strerror(errno));
		return 1;
	}
	ndirs = SFS_MIN(ndirs, (size_t)WATCH_MAX);
	for (size_t i = 0; i < ndirs; i++) {
		wfd[i] = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
		if (wfd[i] < 0)
			SFS_LOG(SFS_ERR, "seed", "--watch: inotify: %s",
				strerror(errno));
		else
			watch_tree(wfd[i], dirs[i]);
	}
	for (;;) {
		int64_t reap = sfs_seed_reap(s);
		int64_t wait = reap;
		if (rekey_pending(s) && (wait < 0 || wait > REKEY_RETRY_MS))
			wait = REKEY_RETRY_MS;
		if (settle_at) {
			int64_t left =
				(int64_t)settle_at - (int64_t)sfs_now_ms();
			left = left < 0 ? 0 : left;
			wait = wait < 0 || left < wait ? left : wait;
		}
		p[0] = (struct pollfd){.fd = sfd, .events = POLLIN};
		p[1] = (struct pollfd){.fd = sfs_seed_watch_fd(s),
				       .events = POLLIN};
		for (size_t i = 0; i < ndirs; i++)
			p[2 + i] =
				(struct pollfd){.fd = wfd[i], .events = POLLIN};
		int n = poll(p, 2 + ndirs,
			     wait < 0 ? -1 : (int)SFS_MIN(wait, 60000));
		if (n < 0 && errno != EINTR)
			break;
		if (p[0].revents & POLLIN) {
			struct signalfd_siginfo si;
			if (read(sfd, &si, sizeof(si)) == sizeof(si)) {
				if (si.ssi_signo != SIGHUP) {
					SFS_LOG(SFS_INFO, "seed",
						"signal %u: stopping",
						si.ssi_signo);
					break;
				}
				sfs_notify_reloading();
				reread_token(s);
				republish(s, SIZE_MAX, "SIGHUP");
			}
		}
		/* A published file changed in place: withdrawn now, the
		 * next generation once it is quiet. */
		uint64_t changed = 0, again = 0;
		if (p[1].revents & POLLIN)
			sfs_seed_files_changed(s, &changed, &again);
		if (changed) {
			settle_at = sfs_now_ms() + WATCH_SETTLE_MS;
			file_dirty |= changed;
		}
		/* A withdrawn file written again (repaired in place): the
		 * next generation a quiet second from its first write;
		 * later writes do not push that back. */
		if (again) {
			if (!settle_at)
				settle_at = sfs_now_ms() + WATCH_SETTLE_MS;
			file_dirty |= again;
		}
		for (size_t i = 0; i < ndirs; i++) {
			if (wfd[i] < 0 || !(p[2 + i].revents & POLLIN))
				continue;
			char buf[4096];
			while (read(wfd[i], buf, sizeof(buf)) > 0)
				;
			settle_at = sfs_now_ms() + WATCH_SETTLE_MS;
			dirty |= 1ull << i;
		}
		if (settle_at && sfs_now_ms() >= settle_at) {
			settle_at = 0;
			for (size_t i = 0; i < sfs_seed_nmodels(s) && i < 64;
			     i++) {
				if (!((dirty | file_dirty) >> i & 1))
					continue;
				republish(s, i,
					  file_dirty >> i & 1
						  ? "a published file changed "
						    "on disk"
						  : "the model directory "
						    "changed");
				if (i < ndirs && wfd[i] >= 0)
					watch_tree(wfd[i], dirs[i]);
			}
			dirty = file_dirty = 0;
		}
	}
	for (size_t i = 0; i < ndirs; i++)
		if (wfd[i] >= 0)
			close(wfd[i]);
	close(sfd);
	return 0;
}

/* --registry: the seed's records under its lease; one line on stderr
 * when it cannot. */
static int start_registry(struct sfs_seed *s, const struct sfs_reg_cfg *rcfg,
			  unsigned int ttl_s, const char *advertise,
			  const char *host, unsigned int bound,
			  struct sfs_reg **reg)
{
	char control[300], err[1024], name[256] = "", h[256], p[16];
	int rc;

	if (advertise) {
		if (sfs_parse_hostport(advertise, h, sizeof(h), p, sizeof(p)) ||
		    !*h) {
			fprintf(stderr,
				"seedfs seed: --advertise %s: not HOST[:PORT]\n",
				advertise);
			return -EINVAL;
		}
		if (*p)
			snprintf(control, sizeof(control), "%s", advertise);
		else
			snprintf(control, sizeof(control), "%s:%u", advertise,
				 bound);
	}
	if (sfs_control_init()) {
		fprintf(stderr, "seedfs seed: cannot initialise libcurl\n");
		return -EIO;
	}
	if ((rc = sfs_reg_open(rcfg, reg, err, sizeof(err))) ||
	    (rc = sfs_reg_check(*reg, err, sizeof(err)))) {
		char line[1200];
		snprintf(line, sizeof(line), "registry %s: %s", rcfg->url, err);
		cli_err("seedfs seed", line);
		sfs_reg_free(*reg);
		*reg = NULL;
		return rc;
	}
	if (!advertise) {
		/* Listening everywhere: the address it reaches etcd from is
		 * the one the fleet most likely reaches it at. */
		const char *hh = host;
		int v6 = strchr(hh, ':') != NULL;
		if (!*host || !strcmp(host, "0.0.0.0") || !strcmp(host, "::")) {
			if (sfs_reg_local_ip(*reg, name, sizeof(name)) &&
			    gethostname(name, sizeof(name) - 1))
				snprintf(name, sizeof(name), "localhost");
			hh = name;
			v6 = 0;
		}
		snprintf(control, sizeof(control), "%s%s%s:%u", v6 ? "[" : "",
			 hh, v6 ? "]" : "", bound);
	}
	if ((rc = sfs_seed_reg_start(s, *reg, ttl_s, control, &seedreg, err,
				     sizeof(err)))) {
		cli_err("seedfs seed", err);
		sfs_reg_free(*reg);
		*reg = NULL;
		return rc;
	}
	SFS_LOG(SFS_INFO, "registry", "recorded in %s as %s (lease TTL %u s)",
		sfs_reg_url(*reg), control, ttl_s);
	return 0;
}

static int bad(const char *opt, const char *val)
{
	fprintf(stderr, "seedfs seed: invalid value '%s' for %s\n", val, opt);
	return 2;
}

/* "SECONDS", or a number and s, m, h or d, into *out (seconds). */
static int parse_duration(const char *text, uint64_t *out)
{
	static const struct {
		char c;
		uint64_t s;
	} units[] = {{'s', 1}, {'m', 60}, {'h', 3600}, {'d', 86400}};
	char num[24];
	size_t n = strlen(text);
	uint64_t v, mul = 1;
	for (size_t i = 0; n > 1 && i < SFS_ARRAY_SIZE(units); i++)
		if (text[n - 1] == units[i].c) {
			mul = units[i].s;
			n--;
			break;
		}
	if (!n || n >= sizeof(num))
		return -1;
	memcpy(num, text, n);
	num[n] = '\0';
	if (sfs_parse_u64(num, &v) || v > UINT32_MAX / mul)
		return -1;
	*out = v * mul;
	return 0;
}

int sfs_cli_seed(int argc, char **argv)
{
	int watch = 0, revoke_now = 0, digest_given = 0;
	struct sfs_seed_cfg cfg = {.keep_unchanged = 1,
				   .grace_s = 60,
				   .csum_shift = 20,
				   .digest_sha256 = 1,
				   .inline_max = 64 << 10,
				   .mr_max = 1ull << 30,
				   .timeout_ms = 10000};
	const char *listen = NULL, *fabric_addr = NULL;
	const char *token_file = NULL, *scrape_file = NULL;
	const char *sign_key_file = NULL, *ring_key_file = NULL;
	struct sfs_sign_key *sign_key = NULL;
	struct sfs_auth *ring_auth = NULL;
	uint8_t ring_key[32];
	const char *tls_cert = NULL, *tls_key = NULL;
	struct sfs_tls_pair *tls = NULL;
	struct sfs_seed_dir dirs[WATCH_MAX];
	size_t ndirs = 0;
	char host[256], port[16], err[SFS_XPORT_ERR_MAX];
	struct sfs_seed *s = NULL;
	struct sfs_ctl *ctl = NULL;
	unsigned int bound;
	uint64_t v;
	int c, rc;

	const char *opt_protocol = NULL, *advertise = NULL;
	struct sfs_reg_cfg rcfg = {0};
	struct sfs_reg *reg = NULL;
	unsigned int reg_ttl = 10;
	optind = 1;
	while ((c = getopt_long(argc, argv, "h", long_opts, NULL)) != -1) {
		switch (c) {
		case OPT_MODEL_DIR: {
			if (ndirs == WATCH_MAX) {
				fprintf(stderr,
					"seedfs seed: at most %d --model-dir\n",
					WATCH_MAX);
				return 2;
			}
			/* NAME=DIR names it; a path may hold '=' only after
			 * a '/'. */
			char *eq = strchr(optarg, '=');
			if (eq && eq != optarg &&
			    (size_t)(eq - optarg) < strcspn(optarg, "/")) {
				*eq = '\0';
				dirs[ndirs++] = (struct sfs_seed_dir){
					.name = optarg, .dir = eq + 1};
			} else {
				dirs[ndirs++] =
					(struct sfs_seed_dir){.dir = optarg};
			}
			break;
		}
		case OPT_NAME:
			cfg.name = optarg;
			break;
		case OPT_LISTEN:
			listen = optarg;
			break;
		case OPT_TOKEN_FILE:
			token_file = optarg;
			break;
		case OPT_METRICS_TOKEN_FILE:
			scrape_file = optarg;
			break;
		case OPT_TLS_CERT:
			tls_cert = optarg;
			break;
		case OPT_TLS_KEY:
			tls_key = optarg;
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
		case OPT_LOG_FORMAT:
			if (sfs_log_set_format(optarg))
				return bad("--log-format", optarg);
			break;
		case OPT_LOG_FILE:
			if ((rc = sfs_log_to_file(optarg))) {
				fprintf(stderr,
					"seedfs seed: --log-file %s: %s\n",
					optarg, strerror(-rc));
				return 2;
			}
			break;
		case OPT_GRACE:
			if (sfs_parse_u64(optarg, &v) || v > 86400)
				return bad("--grace", optarg);
			cfg.grace_s = (uint32_t)v;
			break;
		case OPT_FLEET_FROM:
			if (sfs_parse_u64(optarg, &v) || v < 2 ||
			    v > SFS_ANNOUNCED_MAX)
				return bad("--fleet-from (2 to 1024)", optarg);
			cfg.fleet_from = (uint32_t)v;
			break;
		case OPT_ANNOUNCE_PER_HOST:
			if (sfs_parse_u64(optarg, &v) || v < 1 ||
			    v > SFS_ANNOUNCED_MAX)
				return bad("--announce-per-host (1 to 1024)",
					   optarg);
			cfg.announce_per_host = (uint32_t)v;
			break;
		case OPT_RING_KEY_FILE:
			ring_key_file = optarg;
			break;
		case OPT_REVOKE_NOW:
			revoke_now = 1;
			break;
		case OPT_DIGEST:
			if (strcmp(optarg, "sha256") && strcmp(optarg, "xxh3"))
				return bad("--digest (sha256 or xxh3)", optarg);
			cfg.digest_sha256 = !strcmp(optarg, "sha256");
			digest_given = 1;
			break;
		case OPT_SIGN_KEY:
			sign_key_file = optarg;
			break;
		case OPT_SIGN_VALIDITY:
			if (parse_duration(optarg, &v) ||
			    v < SFS_SIGN_VALIDITY_MIN_S ||
			    v > SFS_SIGN_VALIDITY_MAX_S)
				return bad("--sign-validity (10s to 366d)",
					   optarg);
			cfg.sign_validity_s = (uint32_t)v;
			break;
		case OPT_TEST_SIGN_CLOCK: {
			char *end;
			errno = 0;
			long long sec = strtoll(optarg, &end, 10);
			if (errno || end == optarg || *end ||
			    sec < -(10ll * 366 * 86400) ||
			    sec > 10ll * 366 * 86400)
				return bad("--test-sign-clock", optarg);
			cfg.test_sign_clock_s = sec;
			break;
		}
		case OPT_WATCH:
			watch = 1;
			break;
		case OPT_IDENTITY:
			cfg.identity = optarg;
			break;
		case OPT_REGISTRY:
			rcfg.url = optarg;
			break;
		case OPT_REGISTRY_CA:
			rcfg.ca_file = optarg;
			break;
		case OPT_REGISTRY_AUTH:
			rcfg.auth_file = optarg;
			break;
		case OPT_REGISTRY_TTL:
			if (sfs_parse_u64(optarg, &v) || v < 3 || v > 3600)
				return bad("--registry-ttl", optarg);
			reg_ttl = (unsigned int)v;
			break;
		case OPT_ADVERTISE:
			advertise = optarg;
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
		case OPT_TEST_AFTER_WALK:
			cfg.test_after_walk = optarg;
			break;
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
	if (!ndirs) {
		fprintf(stderr, "seedfs seed: --model-dir is required "
				"(seedfs seed --help)\n");
		return 2;
	}
	if (cfg.name && (ndirs > 1 || dirs[0].name)) {
		fprintf(stderr,
			"seedfs seed: --name names a single model; with "
			"several, use --model-dir NAME=DIR\n");
		return 2;
	}
	for (size_t i = 0; i < ndirs; i++)
		if (!*dirs[i].dir) {
			fprintf(stderr,
				"seedfs seed: --model-dir %s%s: no "
				"directory\n",
				dirs[i].name ? dirs[i].name : "",
				dirs[i].name ? "=" : "");
			return 2;
		}
	cfg.model_dir = dirs[0].dir;
	if (dirs[0].name)
		cfg.name = dirs[0].name;
	cfg.more = dirs + 1;
	cfg.nmore = ndirs - 1;
	cfg.protocol =
		sfs_xport_choose(opt_protocol, getenv("SEEDFS_PROTOCOL"));
	if (!cfg.protocol)
		cfg.protocol = "tcp";
	if (!tls_cert != !tls_key) {
		fprintf(stderr, "seedfs seed: --tls-cert and --tls-key go "
				"together\n");
		return 2;
	}
	token_file = sfs_auth_file(token_file);
	if (token_file && sfs_auth_load(token_file, "--token-file", &seed_auth,
					err, sizeof(err))) {
		cli_err("seedfs seed", err);
		return 2;
	}
	if (scrape_file && sfs_auth_load(scrape_file, "--metrics-token-file",
					 &scrape_auth, err, sizeof(err))) {
		cli_err("seedfs seed", err);
		sfs_auth_free(seed_auth);
		return 2;
	}
	if (scrape_auth && seed_auth && sfs_auth_same(scrape_auth, seed_auth)) {
		fprintf(stderr,
			"seedfs seed: --metrics-token-file %s holds the token "
			"of --token-file: a scraper would read every model; "
			"give it a token of its own\n",
			scrape_file);
		sfs_auth_free(scrape_auth);
		sfs_auth_free(seed_auth);
		return 2;
	}
	if (tls_cert &&
	    sfs_tls_pair_load(tls_cert, tls_key, &tls, err, sizeof(err))) {
		cli_err("seedfs seed", err);
		sfs_auth_free(scrape_auth);
		sfs_auth_free(seed_auth);
		return 2;
	}
	/* No checksum chunks: no digests either, unless asked for. */
	if (!digest_given && !cfg.csum_shift)
		cfg.digest_sha256 = 0;
	if (cfg.digest_sha256 && !cfg.csum_shift) {
		fprintf(stderr, "seedfs seed: --digest sha256 needs checksum "
				"chunks (--checksum-chunk is 0)\n");
		rc = 2;
		goto out_secrets;
	}
	if (!sign_key_file && cfg.sign_validity_s) {
		fprintf(stderr, "seedfs seed: --sign-validity goes with "
				"--sign-key\n");
		rc = 2;
		goto out_secrets;
	}
	if (sign_key_file &&
	    sfs_sign_key_load(sign_key_file, &sign_key, err, sizeof(err))) {
		fprintf(stderr, "seedfs seed: %s\n", err);
		rc = 2;
		goto out_secrets;
	}
	cfg.sign_key = sign_key;
	if (ring_key_file) {
		if (sfs_auth_load(ring_key_file, "--ring-key-file", &ring_auth,
				  err, sizeof(err))) {
			cli_err("seedfs seed", err);
			rc = 2;
			goto out_secrets;
		}
		/* Every token holder knows the token: a ring keyed by it
		 * could be ground again. */
		if (seed_auth && sfs_auth_same(ring_auth, seed_auth)) {
			fprintf(stderr,
				"seedfs seed: --ring-key-file %s holds the "
				"token of --token-file: every token holder "
				"could place addresses in the ring; give it a "
				"secret of the seeds alone\n",
				ring_key_file);
			rc = 2;
			goto out_secrets;
		}
		sfs_auth_digest(ring_auth, ring_key);
		cfg.ring_key = ring_key;
	}
	/* No token: nobody but this host, unless told otherwise. */
	if (!listen)
		listen = seed_auth ? "0.0.0.0:7070" : "127.0.0.1:7070";
	if (sfs_parse_hostport(listen, host, sizeof(host), port,
			       sizeof(port))) {
		rc = bad("--listen", listen);
		goto out_secrets;
	}
	if (!seed_auth && !sfs_ctlsrv_loopback(host))
		fprintf(stderr,
			"seedfs seed: warning: --listen %s without "
			"--token-file: whoever reaches it reads the models "
			"(docs/security.md)\n",
			listen);
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

	sfs_raise_nofile();
	rc = sfs_seed_open(&cfg, &s, err, sizeof(err));
	if (rc) {
		cli_err("seedfs seed", err);
		rc = 1;
		goto out_secrets;
	}
	/* Its token, keys and the models' keys out of core dumps (what
	 * it serves decides: shm readers need it dumpable). */
	cli_no_dumps("seed", sfs_seed_protocol(s));
	/* Without a token the port answers only its own names (DNS
	 * rebinding): --advertise's is one. */
	char adv[256], adv_port[16];
	const char *names[2] = {NULL, NULL};
	if (advertise &&
	    !sfs_parse_hostport(advertise, adv, sizeof(adv), adv_port,
				sizeof(adv_port)) &&
	    *adv)
		names[0] = adv;
	struct sfs_ctlsrv_cfg sc = {.host = host,
				    .port = port,
				    .auth = seed_auth,
				    .scrape = scrape_auth,
				    .tls = tls,
				    .names = names};
	rc = sfs_ctl_start(s, &sc, &ctl, &bound, err, sizeof(err));
	if (rc) {
		cli_err("seedfs seed", err);
		sfs_seed_close(s);
		rc = 1;
		goto out_secrets;
	}
	if (rcfg.url && (rc = start_registry(s, &rcfg, reg_ttl, advertise, host,
					     bound, &reg))) {
		sfs_ctl_stop(ctl);
		sfs_seed_close(s);
		rc = 1;
		goto out_secrets;
	}
	char summary[1024];
	sfs_seed_summary(s, summary, sizeof(summary));
	int v6 = strchr(host, ':') != NULL;
	printf("seedfs seed: ready on %s%s%s%s:%u: %s; protocol %s%s%s; "
	       "%s%s%s\n",
	       tls ? "https://" : "", v6 ? "[" : "", *host ? host : "0.0.0.0",
	       v6 ? "]" : "", bound, summary, sfs_seed_protocol(s),
	       reg ? "; registered in " : "", reg ? sfs_reg_url(reg) : "",
	       seed_auth ? "token required" : "unauthenticated",
	       tls ? "; tls pin " : "", tls ? sfs_tls_pair_pin(tls) : "");
	fflush(stdout);
	{
		char st[1400];
		snprintf(st, sizeof(st), "ready on port %u: %s; %s", bound,
			 summary,
			 seed_auth ? "token required" : "unauthenticated");
		sfs_notify_ready(st);
	}
	SFS_LOG(SFS_INFO, "seed", "serving %s on port %u", summary, bound);

	const char *wdirs[WATCH_MAX];
	for (size_t i = 0; i < ndirs; i++)
		wdirs[i] = dirs[i].dir;
	rekey_grace_s = revoke_now ? 0 : cfg.grace_s;
	rc = serve(s, &set, wdirs, watch ? ndirs : 0);
	sfs_notify_stopping();
	/* Out of the registry first: mounts stop asking a seed going away. */
	sfs_seed_reg_stop(seedreg);
	seedreg = NULL;
	sfs_reg_free(reg);
	sfs_ctl_stop(ctl);
	sfs_seed_close(s);
out_secrets:
	explicit_bzero(ring_key, sizeof(ring_key));
	sfs_auth_free(ring_auth);
	sfs_sign_key_free(sign_key);
	sfs_tls_pair_free(tls);
	sfs_auth_free(scrape_auth);
	scrape_auth = NULL;
	sfs_auth_free(seed_auth);
	seed_auth = NULL;
	return rc;
}
