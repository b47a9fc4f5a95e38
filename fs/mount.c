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
#include "fs/mount.h"

#include "cache/cache.h"
#include "cache/disk.h"
#include "common/log.h"
#include "common/mem.h"
#include "common/util.h"
#include "fs/fsops.h"
#include "fs/gens.h"
#include "fs/mctl.h"
#include "fs/mntcheck.h"
#include "fs/status.h"
#include "fs/tree.h"
#include "metadata/control.h"
#include "metadata/manifest.h"
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
	char *chunk_size;
	char *read_ahead_kb;
	char *max_background;
	char *ahead;
	char *require;
	int no_verify;
	int prefetch;
	int nonempty;
	char *mnt; /* the first non-option argument: the mount point */
	char *log_level;
	char *log_file;
	int help;
	int version;
};

#define OPT(t, f)                                                              \
	{                                                                      \
		t, offsetof(struct mount_opts, f), 0                           \
	}

static const struct fuse_opt mount_spec[] = {
	OPT("--seed=%s", seed),
	OPT("--seed %s", seed),
	OPT("--protocol=%s", protocol),
	OPT("--protocol %s", protocol),
	OPT("--timeout=%s", timeout),
	OPT("--timeout %s", timeout),
	OPT("--cache-size=%s", cache_size),
	OPT("--cache-size %s", cache_size),
	OPT("--cache-dir=%s", cache_dir),
	OPT("--cache-dir %s", cache_dir),
	OPT("--cache-dir-size=%s", cache_dir_size),
	OPT("--cache-dir-size %s", cache_dir_size),
	OPT("--chunk-size=%s", chunk_size),
	OPT("--chunk-size %s", chunk_size),
	OPT("--read-ahead-kb=%s", read_ahead_kb),
	OPT("--read-ahead-kb %s", read_ahead_kb),
	OPT("--max-background=%s", max_background),
	OPT("--max-background %s", max_background),
	OPT("--ahead=%s", ahead),
	OPT("--ahead %s", ahead),
	OPT("--require=%s", require),
	OPT("--require %s", require),
	{"nonempty", offsetof(struct mount_opts, nonempty), 1},
	{"--no-verify", offsetof(struct mount_opts, no_verify), 1},
	{"--prefetch", offsetof(struct mount_opts, prefetch), 1},
	OPT("--log-level=%s", log_level),
	OPT("--log-level %s", log_level),
	OPT("--log-file=%s", log_file),
	OPT("--log-file %s", log_file),
	{"-h", offsetof(struct mount_opts, help), 1},
	{"--help", offsetof(struct mount_opts, help), 1},
	{"-V", offsetof(struct mount_opts, version), 1},
	{"--version", offsetof(struct mount_opts, version), 1},
	FUSE_OPT_END};

/* Resolved settings. */
struct mount_cfg {
	const char *seed;
	const char *protocol; /* NULL: what the seed publishes */
	unsigned int timeout_ms;
	uint64_t cache_size;
	const char *cache_dir;	 /* NULL: no disk tier */
	uint64_t cache_dir_size; /* 0: the filesystem's room */
	uint32_t chunk_size;
	unsigned int read_ahead_kb;
	unsigned int max_background;
	uint64_t ahead; /* largest read-ahead window; 0: off */
	int no_verify;
	int prefetch;		     /* warm every file once mounted */
	struct sfs_require *require; /* owned; NULL: show every source */
	const char *require_text;
	uint64_t start_ms; /* when the command started (monotonic) */
};

static void usage(void)
{
	char names[128];
	sfs_xport_known(NULL, names, sizeof(names));
	printf("usage: seedfs mount --seed HOST:PORT MOUNTPOINT [options]\n"
	       "\n"
	       "Mount the model a seed publishes at MOUNTPOINT/NAME, read-only.\n"
	       "Reads become one-sided reads of the seed's memory.  Goes to\n"
	       "the background once mounted (unless -f); fusermount3 -u\n"
	       "MOUNTPOINT or SIGTERM unmounts.\n"
	       "\n"
	       "seedfs options:\n"
	       "    --seed HOST:PORT       the seed's control port (required)\n"
	       "    --protocol NAME        %s; default\n"
	       "                           $SEEDFS_PROTOCOL, else (and for\n"
	       "                           auto) what the seed publishes\n"
	       "    --timeout SECONDS      a read fails with EIO once the seed\n"
	       "                           made no progress for this long\n"
	       "                           (default 10); a slow link is not\n"
	       "                           a failure\n"
	       "    --cache-size SIZE      chunk cache in registered memory\n"
	       "                           (default 1/16 of RAM, 64M to 4G,\n"
	       "                           at most half of what the machine\n"
	       "                           and the cgroup can give; more than\n"
	       "                           they can give is refused)\n"
	       "    --cache-dir DIR        keep pulled chunks in DIR too; a\n"
	       "                           later mount reuses those of the same\n"
	       "                           seed generation that match its\n"
	       "                           checksums\n"
	       "    --cache-dir-size SIZE  bound on DIR (default: none but the\n"
	       "                           filesystem's); older generations\n"
	       "                           go first\n"
	       "    --chunk-size SIZE      bytes per pull, power of two\n"
	       "                           (default 1M)\n"
	       "    --read-ahead-kb N      kernel read-ahead for the mount\n"
	       "                           (default 16384; 0 keeps the kernel's)\n"
	       "    --max-background N     FUSE requests the kernel keeps in\n"
	       "                           flight (default 32)\n"
	       "    --no-verify            serve pulled bytes without checking\n"
	       "                           them against the seed's checksums\n"
	       "    --ahead SIZE           pull up to SIZE ahead of a sequential\n"
	       "                           reader (default 64M, at most a\n"
	       "                           quarter of the cache; 0: off)\n"
	       "    --require K=V[,K=V...] show a model only while its identity\n"
	       "                           matches (keys: model, revision,\n"
	       "                           generation, dtype, quant, layout,\n"
	       "                           layout_version, tp_size, tp_rank,\n"
	       "                           pp_size, pp_rank, ep_size, ep_rank,\n"
	       "                           framework); .seedfs/status says\n"
	       "                           what differs\n"
	       "    --prefetch             once mounted, warm the cache with\n"
	       "                           every file in the background (see\n"
	       "                           seedfs prefetch)\n"
	       "    -o nonempty            mount over a directory that is not\n"
	       "                           empty (refused otherwise)\n"
	       "    --log-level LEVEL      err, warn, info, debug (default info)\n"
	       "    --log-file FILE        log here; default: stderr with -f,\n"
	       "                           syslog in the background\n"
	       "    -h, --help             this text\n"
	       "    -V, --version          version\n"
	       "\n",
	       names);
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

/* 1/16 of the RAM, within [64 MiB, 4 GiB], and at most half of what the
 * machine and the mount's cgroup can still give: the replica's engine
 * needs the rest. */
static uint64_t default_cache_size(const struct sfs_mem_room *room)
{
	long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
	uint64_t v = pages > 0 && psz > 0 ? (uint64_t)pages * (uint64_t)psz / 16
					  : 256u << 20;
	v = SFS_MIN(v, room->available / 2);
	v = SFS_MAX(v, 64ull << 20);
	v = SFS_MIN(v, 4ull << 30);
	return v & ~((1ull << 20) - 1);
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

static int resolve(const struct mount_opts *o, struct mount_cfg *c)
{
	uint64_t v;
	c->seed = o->seed;
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
	if (!c->seed) {
		fprintf(stderr, "seedfs mount: --seed HOST:PORT is required "
				"(seedfs mount --help)\n");
		return -EINVAL;
	}
	char h[256], p[16];
	if (sfs_parse_hostport(c->seed, h, sizeof(h), p, sizeof(p)) || !*h) {
		fprintf(stderr, "seedfs mount: --seed '%s' is not HOST:PORT\n",
			c->seed);
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
	c->no_verify = o->no_verify;
	c->prefetch = o->prefetch;
	c->ahead = 64u << 20;
	if (num_opt(o->ahead, "--ahead", sfs_parse_size, 0, 1ull << 40, &v))
		return -EINVAL;
	if (o->ahead)
		c->ahead = v;
	if (o->require) {
		char err[512];
		if (sfs_require_parse(o->require, &c->require, err,
				      sizeof(err))) {
			fprintf(stderr, "seedfs mount: %s\n", err);
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

/*
 * Raise the kernel read-ahead of our mount so buffered reads reach us as
 * 1 MiB requests instead of 128 KiB ones.  The device number comes from
 * mountinfo: stat() on the mount point would wait for our own INIT.
 */
static void set_read_ahead(const char *mnt, unsigned int kb)
{
	char line[4096], path[128], want[PATH_MAX * 4];
	unsigned int major = 0, minor = 0;
	int found = 0;
	FILE *f;

	/* mountinfo escapes space, tab, newline and backslash as \ooo */
	size_t o = 0;
	for (const char *s = mnt; *s && o + 5 < sizeof(want); s++) {
		if (*s == ' ' || *s == '\t' || *s == '\n' || *s == '\\')
			o += (size_t)sprintf(want + o, "\\%03o",
					     (unsigned char)*s);
		else
			want[o++] = *s;
	}
	want[o] = '\0';
	if (!(f = fopen("/proc/self/mountinfo", "r")))
		return;
	while (fgets(line, sizeof(line), f)) {
		char mp[PATH_MAX * 4];
		unsigned int ma, mi;
		/* id parent major:minor root mountpoint ... - fstype ... */
		if (sscanf(line, "%*u %*u %u:%u %*s %4095s", &ma, &mi, mp) ==
			    3 &&
		    strcmp(mp, want) == 0 && strstr(line, " - fuse")) {
			major = ma;
			minor = mi;
			found = 1; /* the last match is the newest mount */
		}
	}
	fclose(f);
	if (!found) {
		SFS_LOG(SFS_WARN, "fs", "read_ahead_kb: %s not in mountinfo",
			mnt);
		return;
	}
	snprintf(path, sizeof(path), "/sys/class/bdi/%u:%u/read_ahead_kb",
		 major, minor);
	if (!(f = fopen(path, "w"))) {
		SFS_LOG(SFS_WARN, "fs", "read_ahead_kb: %s: %s", path,
			strerror(errno));
		return;
	}
	fprintf(f, "%u\n", kb);
	if (fclose(f))
		SFS_LOG(SFS_WARN, "fs", "read_ahead_kb: writing %s: %s", path,
			strerror(errno));
	else
		SFS_LOG(SFS_DEBUG, "fs", "read_ahead_kb of %s set to %u", mnt,
			kb);
}

struct replica {
	struct sfs_status status;
	int status_ready;
	char *json; /* the first generation's, until gens owns it */
	size_t json_len;
	struct sfs_manifest *m; /* likewise */
	struct sfs_xport *x;
	struct sfs_disk *disk;
	struct sfs_cache *cache;
	struct sfs_tree *tree;
	struct sfs_gens *gens;
	struct sfs_mctl *ctl;
	struct sfs_fs fs;
};

static void replica_close(struct replica *r)
{
	/* Nothing may post a pull once the transport is quiesced: stop the
	 * cache's threads first (the disk tier's post what they do not
	 * find on disk).  Then cancel the pulls in flight, which write into
	 * the cache, then free the cache (and its registration), then the
	 * transport. */
	sfs_cache_stop(r->cache);
	size_t left = sfs_xport_quiesce(r->x);
	sfs_gens_free(r->gens); /* its sweeper retires cache sources */
	sfs_cache_free_quiesced(r->cache, left);
	sfs_disk_close(r->disk);
	sfs_xport_close(r->x);
	sfs_tree_free(r->tree);
	if (r->status_ready)
		sfs_status_destroy(&r->status);
	pthread_rwlock_destroy(&r->fs.lock);
	pthread_mutex_destroy(&r->fs.handles_lock);
	if (!r->gens) {
		sfs_manifest_free(r->m);
		free(r->json);
	}
}

static int reconnect_cb(void *arg, uint64_t peer, uint64_t *new_peer)
{
	return sfs_gens_reconnect(arg, peer, new_peer);
}

/* Fetch, check, connect, build.  One line on stderr on failure. */
static int replica_open(const struct mount_cfg *c, struct replica *r)
{
	char err[SFS_XPORT_ERR_MAX];
	int rc;

	/* Locked by one mount at a time: find out before anything else. */
	if (c->cache_dir && (rc = sfs_disk_open(c->cache_dir, c->cache_dir_size,
						&r->disk, err, sizeof(err)))) {
		fprintf(stderr, "seedfs mount: %s\n", err);
		return rc;
	}
	uint64_t tm = sfs_now_ms();
	rc = sfs_control_get(c->seed, "/v1/manifest", c->timeout_ms,
			     SFS_MANIFEST_MAX, &r->json, &r->json_len, err,
			     sizeof(err));
	SFS_LOG(SFS_DEBUG, "mount", "manifest fetched in %llu ms",
		(unsigned long long)(sfs_now_ms() - tm));
	if (rc) {
		fprintf(stderr, "seedfs mount: cannot fetch the manifest: %s\n",
			err);
		return rc;
	}
	rc = sfs_manifest_decode(r->json, r->json_len, &r->m, err, sizeof(err));
	if (rc) {
		fprintf(stderr, "seedfs mount: bad manifest from %s: %s\n",
			c->seed, err);
		return rc;
	}
	size_t ep;
	uint64_t peer, t0 = sfs_now_ms();
	rc = sfs_control_open(c->seed, r->m, c->protocol, c->timeout_ms, &r->x,
			      &ep, &peer, err, sizeof(err));
	if (rc) {
		fprintf(stderr, "seedfs mount: %s\n", err);
		return rc;
	}
	r->status.transport_ms = sfs_now_ms() - t0;
	const char *proto = r->m->eps[ep].protocol;
	/* Chunks are verified whole: at least one checksum chunk each. */
	uint32_t chunk = c->chunk_size;
	for (size_t i = 0; i < r->m->nregions; i++)
		if (r->m->regions[i].csum_shift &&
		    (1u << r->m->regions[i].csum_shift) > chunk)
			chunk = 1u << r->m->regions[i].csum_shift;
	if (chunk != c->chunk_size)
		SFS_LOG(SFS_INFO, "mount",
			"chunk size %u: the seed's checksum chunks", chunk);

	struct sfs_cache_cfg cc = {.xport = r->x,
				   .size = c->cache_size,
				   .chunk_size = chunk,
				   .timeout_ms = c->timeout_ms,
				   .no_verify = c->no_verify,
				   .disk = r->disk};
	uint64_t tc = sfs_now_ms();
	rc = sfs_cache_new(&cc, &r->cache, err, sizeof(err));
	SFS_LOG(SFS_DEBUG, "mount", "cache ready in %llu ms",
		(unsigned long long)(sfs_now_ms() - tc));
	if (rc) {
		fprintf(stderr, "seedfs mount: %s\n", err);
		return rc;
	}
	struct sfs_cache_region *regs =
		calloc(r->m->nregions ? r->m->nregions : 1, sizeof(*regs));
	if (!regs)
		return -ENOMEM;
	for (size_t i = 0; i < r->m->nregions && !rc; i++) {
		const struct sfs_remote *rem = &r->m->regions[i].rem[ep];
		regs[i].len = r->m->regions[i].len;
		regs[i].raddr = rem->raddr;
		regs[i].csum_shift = r->m->regions[i].csum_shift;
		regs[i].xxh3 = r->m->regions[i].xxh3;
		rc = sfs_control_remote_key(r->x, rem, &regs[i].key);
	}
	if (rc) {
		fprintf(stderr,
			"seedfs mount: protocol %s: cannot use the "
			"seed's raw keys: %s\n",
			proto, strerror(-rc));
		free(regs);
		return rc;
	}
	char label[300];
	uint32_t src;
	snprintf(label, sizeof(label), "seed %s (%s)", c->seed, r->m->model);
	rc = sfs_cache_add_source(r->cache, peer, label, regs, r->m->nregions,
				  &src);
	free(regs);
	if (!rc)
		sfs_gens_persist(r->cache, c->seed, r->m, src);
	if (!rc)
		rc = sfs_tree_new(c->seed,
				  sfs_require_value(c->require, "layout"),
				  &r->tree);
	/* The generations own the manifest from here on; the first one's
	 * view owns the tree's nodes. */
	struct sfs_gens_cfg gc = {.seed = c->seed,
				  .timeout_ms = c->timeout_ms,
				  .x = r->x,
				  .peer = peer,
				  .ep = ep,
				  .cache = r->cache,
				  .tree = r->tree,
				  .tree_lock = &r->fs.lock,
				  .require = c->require};
	struct sfs_view *first = NULL;
	if (!rc)
		rc = sfs_gens_new(&gc, r->json, r->json_len, r->m, src,
				  &r->gens, &first);
	if (!rc)
		sfs_cache_set_reconnect(r->cache, reconnect_cb, r->gens);
	char why[256];
	if (!rc && sfs_gens_hidden(r->gens, why, sizeof(why))) {
		/* Mounted all the same: a later generation may match. */
		fprintf(stderr,
			"seedfs mount: model %s from %s is hidden: %s "
			"(--require %s)\n",
			r->m->model, c->seed, why, c->require_text);
		SFS_LOG(SFS_WARN, "mount", "model %s is hidden: %s",
			r->m->model, why);
	} else if (!rc) {
		rc = sfs_tree_add_model(r->tree, r->m, src, r->json,
					r->json_len, first);
	}
	if (!rc)
		rc = sfs_tree_add_status(r->tree);
	if (rc) {
		fprintf(stderr, "seedfs mount: cannot build the tree: %s\n",
			strerror(-rc));
		return rc;
	}
	struct sfs_xport_info info;
	sfs_xport_info(r->x, &info);
	r->status.seed = c->seed;
	r->status.gens = r->gens;
	r->status.cache = r->cache;
	r->status.disk = r->disk;
	r->status.require = c->require_text;
	r->status_ready = 1;
	snprintf(r->status.protocol, sizeof(r->status.protocol), "%s",
		 info.protocol);
	snprintf(r->status.provider, sizeof(r->status.provider), "%s",
		 info.provider);
	sfs_status_init(&r->status);
	sfs_tree_finish(r->tree);
	for (size_t i = 0; i < r->tree->n; i++)
		if (r->tree->nodes[i].kind == SFS_NODE_FILE)
			r->fs.total_bytes += r->tree->nodes[i].size;
	SFS_LOG(SFS_INFO, "mount",
		"model %s generation %llu from %s: %zu files, %zu tensors, "
		"protocol %s",
		r->m->model, (unsigned long long)r->m->generation, c->seed,
		r->m->nfiles, r->m->ntensors, proto);
	return 0;
}

static void tell_parent(int *fd, char status)
{
	if (*fd < 0)
		return;
	if (write(*fd, &status, 1) != 1)
		SFS_LOG(SFS_WARN, "mount", "cannot signal the parent");
	close(*fd);
	*fd = -1;
}

static void detach_stdio(void)
{
	int fd = open("/dev/null", O_RDWR);
	if (fd < 0)
		return;
	dup2(fd, STDIN_FILENO);
	dup2(fd, STDOUT_FILENO);
	dup2(fd, STDERR_FILENO);
	if (fd > STDERR_FILENO)
		close(fd);
}

/*
 * Runs beside the session loop.  stat() on the mount point returns only
 * once the kernel has processed our INIT reply; read_ahead_kb must be
 * raised after that, because INIT lowers it to what it offered us.  Only
 * then is the mount ready and the waiting parent told so.
 */
struct ready_arg {
	struct fuse_session *se;
	const char *mountpoint;
	unsigned int read_ahead_kb;
	int ready_fd;
	uint64_t start_ms; /* when the command started */
	struct sfs_status *status;
	struct sfs_cache *cache;
};

static void *ready_thread(void *p)
{
	struct ready_arg *a = p;
	struct stat st;

	if (stat(a->mountpoint, &st)) {
		SFS_LOG(SFS_ERR, "mount", "mount point %s is not usable: %s",
			a->mountpoint, strerror(errno));
		tell_parent(&a->ready_fd, 'F');
		fuse_session_exit(a->se);
		return NULL;
	}
	if (a->read_ahead_kb)
		set_read_ahead(a->mountpoint, a->read_ahead_kb);
	struct sfs_status *s = a->status;
	pthread_mutex_lock(&s->lock);
	s->ready_ms = sfs_now_ms() - a->start_ms;
	uint64_t ready = s->ready_ms, xport = s->transport_ms;
	pthread_mutex_unlock(&s->lock);
	SFS_LOG(SFS_INFO, "mount",
		"ready in %.2f s (transport start-up %.2f s, the rest %.2f s)",
		(double)ready / 1e3, (double)xport / 1e3,
		(double)(ready - SFS_MIN(ready, xport)) / 1e3);
	/* The rest of the cache is faulted in from now on, behind. */
	sfs_cache_grow(a->cache);
	if (a->ready_fd >= 0) {
		tell_parent(&a->ready_fd, 'R');
		detach_stdio();
	}
	return NULL;
}

/* The sweeper's way to drop the page cache of a generation that is no
 * longer served (not from a request: no deadlock with the kernel). */
static void drop_page_cache(void *arg, uint64_t ino)
{
	int rc = fuse_lowlevel_notify_inval_inode(arg, ino, 0, 0);
	if (rc && rc != -ENOENT)
		SFS_LOG(SFS_WARN, "mount", "invalidating inode %llu: %s",
			(unsigned long long)ino, strerror(-rc));
}

static int serve(const struct mount_cfg *c, struct fuse_args *args,
		 struct fuse_cmdline_opts *cmd, const char *log_file,
		 int ready_fd)
{
	struct replica r;
	struct fuse_session *se;
	int rc = 1;

	memset(&r, 0, sizeof(r));
	pthread_rwlock_init(&r.fs.lock, NULL);
	pthread_mutex_init(&r.fs.handles_lock, NULL);
	if (replica_open(c, &r))
		goto out;
	r.fs.tree = r.tree;
	r.fs.gens = r.gens;
	r.fs.cache = r.cache;
	/* Names follow the seed's generations within a second; an inode's
	 * attributes never change. */
	r.fs.entry_timeout = 1.0;
	r.fs.negative_timeout = 0.2;
	r.fs.attr_timeout = 86400.0;
	r.fs.ra_max = SFS_MIN(c->ahead, c->cache_size / 4);
	r.fs.ra_min = SFS_MIN(4ull * c->chunk_size, r.fs.ra_max);
	r.fs.status = sfs_status_render;
	r.fs.status_arg = &r.status;
	r.fs.max_background = c->max_background;
	r.fs.uid = getuid();
	r.fs.gid = getgid();
	clock_gettime(CLOCK_REALTIME, &r.fs.mtime);

	se = fuse_session_new(args, &sfs_fs_ops, sizeof(sfs_fs_ops), &r.fs);
	if (se)
		sfs_gens_set_inval(r.gens, drop_page_cache, se);
	if (!se) {
		fprintf(stderr, "seedfs mount: cannot create the FUSE "
				"session (see the line above)\n");
		goto out;
	}
	/* libinfinipath (loaded with Debian's libfabric for psm) installs
	 * SIGINT/SIGTERM/SIGHUP handlers when it loads; libfuse installs
	 * its own only over SIG_DFL.  Take them back so a signal unmounts. */
	signal(SIGHUP, SIG_DFL);
	signal(SIGINT, SIG_DFL);
	signal(SIGTERM, SIG_DFL);
	/* A seed that dies under the transport's socket must not take the
	 * mount with it (libfabric tcp writes without MSG_NOSIGNAL). */
	signal(SIGPIPE, SIG_IGN);
	if (fuse_set_signal_handlers(se)) {
		fprintf(stderr, "seedfs mount: cannot set signal handlers\n");
		goto out_destroy;
	}
	if (fuse_session_mount(se, cmd->mountpoint)) {
		fprintf(stderr, "seedfs mount: cannot mount on %s\n",
			cmd->mountpoint);
		goto out_signals;
	}
	SFS_LOG(SFS_INFO, "mount", "mounted %s on %s%s", r.m->model,
		cmd->mountpoint,
		sfs_gens_hidden(r.gens, NULL, 0)
			? " (hidden by --require: see .seedfs/status)"
			: "");
	/* `seedfs prefetch` finds this socket in .seedfs/status. */
	char err[256];
	if (sfs_mctl_start(&r.fs, &r.ctl, err, sizeof(err)))
		SFS_LOG(SFS_WARN, "mount", "seedfs prefetch will not work: %s",
			err);
	else
		r.status.control = sfs_mctl_path(r.ctl);
	if (c->prefetch && r.ctl && sfs_mctl_prefetch_all(r.ctl))
		SFS_LOG(SFS_WARN, "mount", "--prefetch: cannot start");
	if (ready_fd >= 0) {
		if (!log_file)
			sfs_log_to_syslog("seedfs");
		if (chdir("/"))
			SFS_LOG(SFS_WARN, "mount", "chdir /: %s",
				strerror(errno));
	}
	struct ready_arg ra = {.se = se,
			       .mountpoint = cmd->mountpoint,
			       .read_ahead_kb = c->read_ahead_kb,
			       .ready_fd = ready_fd,
			       .start_ms = c->start_ms,
			       .status = &r.status,
			       .cache = r.cache};
	pthread_t ready_tid;
	int ready_started =
		!pthread_create(&ready_tid, NULL, ready_thread, &ra);
	if (!ready_started) {
		SFS_LOG(SFS_ERR, "mount", "cannot start the ready thread");
		goto out_unmount;
	}
	ready_fd = -1; /* the ready thread owns it now */

	if (cmd->singlethread) {
		rc = fuse_session_loop(se);
	} else {
		struct fuse_loop_config *lc = fuse_loop_cfg_create();
		fuse_loop_cfg_set_clone_fd(lc, cmd->clone_fd);
		/* UINT_MAX: not given on the command line. */
		if (cmd->max_threads && cmd->max_threads != UINT_MAX)
			fuse_loop_cfg_set_max_threads(lc, cmd->max_threads);
		if (cmd->max_idle_threads != UINT_MAX)
			fuse_loop_cfg_set_idle_threads(lc,
						       cmd->max_idle_threads);
		rc = fuse_session_loop_mt(se, lc);
		fuse_loop_cfg_destroy(lc);
	}
	/* libfuse returns the signal number when a signal ended the loop:
	 * that is a clean stop, not an error. */
	if (rc > 0)
		SFS_LOG(SFS_INFO, "mount", "signal %d: unmounting %s", rc,
			cmd->mountpoint);
	else
		SFS_LOG(SFS_INFO, "mount", "unmounting %s", cmd->mountpoint);
	rc = rc < 0 ? 1 : 0;
	/* Unmounting aborts the connection, which also releases a ready
	 * thread still waiting in stat(); join it before the session goes. */
	fuse_session_unmount(se);
	pthread_join(ready_tid, NULL);
	goto out_signals;
out_unmount:
	fuse_session_unmount(se);
out_signals:
	fuse_remove_signal_handlers(se);
out_destroy:
	sfs_mctl_stop(r.ctl); /* prefetches use the cache and the tree */
	r.ctl = NULL;
	sfs_gens_stop(r.gens); /* no invalidation of a session gone */
	fuse_session_destroy(se);
	sfs_fs_release_all(&r.fs); /* files still open at the unmount */
out:
	replica_close(&r);
	tell_parent(&ready_fd, 'F');
	return rc;
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

int sfs_mount_main(int argc, char **argv)
{
	struct fuse_args args = FUSE_ARGS_INIT(argc, argv);
	struct fuse_cmdline_opts cmd;
	struct mount_opts o;
	struct mount_cfg c;
	int rc = 2;

	memset(&o, 0, sizeof(o));
	memset(&c, 0, sizeof(c));
	memset(&cmd, 0, sizeof(cmd));
	c.start_ms = sfs_now_ms();
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
	if (o.log_file) {
		int lrc = sfs_log_to_file(o.log_file);
		if (lrc) {
			fprintf(stderr, "seedfs mount: --log-file %s: %s\n",
				o.log_file, strerror(-lrc));
			goto out;
		}
	}
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
		fprintf(stderr, "seedfs mount: %s\n", perr);
		goto out;
	}
	if (*note) {
		fprintf(stderr, "seedfs mount: %s\n", note);
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
	char fsname[300];
	snprintf(fsname, sizeof(fsname), "-oro,subtype=seedfs,fsname=seedfs@%s",
		 c.seed);
	if (fuse_opt_add_arg(&args, fsname) ||
	    (cmd.debug && fuse_opt_add_arg(&args, "-odebug")))
		goto out;
	if (sfs_control_init()) {
		fprintf(stderr, "seedfs mount: cannot initialize libcurl\n");
		goto out;
	}

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
	free(o.seed);
	free(o.protocol);
	free(o.timeout);
	free(o.cache_size);
	free(o.cache_dir);
	free(o.cache_dir_size);
	free(o.chunk_size);
	free(o.read_ahead_kb);
	free(o.max_background);
	free(o.ahead);
	free(o.require);
	free(o.mnt);
	sfs_require_free(c.require);
	free(o.log_level);
	free(o.log_file);
	return rc;
}
