/* SPDX-License-Identifier: MIT */
/*
 * pull.c - `seedfs pull --seed HOST:PORT NAME DEST`: copy a published
 * model to a local directory, no FUSE in the data path.
 *
 * The bytes come through the chunk cache (so they are verified against
 * the seed's checksums, retried, and every wait is bounded) with a deep
 * read-ahead window: the transport keeps pulling while this thread
 * writes what has arrived with pwrite.  Pulling straight into a shared
 * mapping of the new file instead was 2-3x slower on tmpfs (measured:
 * the pages must be allocated, zeroed and faulted in, while pwrite of
 * whole pages skips the zeroing), and RDMA cannot pin shared file
 * mappings on 6.1 anyway.
 */
#include "fs/pull.h"

#include "cache/cache.h"
#include "common/log.h"
#include "common/progress.h"
#include "common/util.h"
#include "metadata/control.h"
#include "metadata/manifest.h"
#include "transports/transport.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct pull {
	struct sfs_cache *cache;
	uint32_t src;
	uint64_t window;
	struct sfs_progress prog;
	/* What a reconnect needs: the seed, the transport, its endpoint. */
	const char *seed;
	struct sfs_xport *x;
	const struct sfs_endpoint *ep;
	unsigned int timeout_ms;
};

/* The cache's reconnect callback: a wedged or broken connection is
 * made anew (bounded by the timeout, logged). */
static int reconnect(void *arg, uint64_t peer, uint64_t *new_peer)
{
	struct pull *p = arg;
	char err[SFS_XPORT_ERR_MAX];
	*new_peer = peer;
	int rc = sfs_control_reconnect(p->seed, p->x, p->ep, p->timeout_ms,
				       new_peer, err, sizeof(err));
	if (rc)
		SFS_LOG(SFS_WARN, "pull", "reconnecting: %s", err);
	return rc;
}

static void usage(FILE *out)
{
	fprintf(out,
		"usage: seedfs pull --seed HOST:PORT NAME DEST [options]\n"
		"\n"
		"Copy the model NAME a seed publishes into the directory DEST\n"
		"(created; it must not exist or be empty), byte-identical and\n"
		"verified against the seed's checksums, at transport speed.\n"
		"\n"
		"options:\n"
		"  --seed HOST:PORT     the seed's control port (required)\n"
		"  --protocol NAME      as for mount (default: the seed's first\n"
		"                       protocol this host can use)\n"
		"  --cache-size SIZE    memory for chunks in flight (default 64M)\n"
		"  --timeout SECONDS    bound on every wait (default 10)\n"
		"  --log-level LEVEL    err, warn, info, debug (default warn)\n"
		"  -h, --help           this text\n");
}

/* DEST must not exist (it is created) or be an empty directory. */
static int make_dest(const char *dest)
{
	DIR *d;
	if (mkdir(dest, 0755) == 0)
		return 0;
	if (errno != EEXIST || !(d = opendir(dest)))
		return -errno;
	struct dirent *e;
	int empty = 1;
	while ((e = readdir(d)))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
			empty = 0;
	closedir(d);
	return empty ? 0 : -ENOTEMPTY;
}

/* Write region bytes [roff, roff+len) of @region to @fd at @at. */
static int copy_region(struct pull *p, int fd, uint32_t region, uint64_t roff,
		       uint64_t len, uint64_t at, uint64_t rlen)
{
	uint64_t ahead = roff;
	while (len) {
		/* Keep the window full ahead of what is written. */
		uint64_t want = SFS_MIN(roff + p->window, rlen);
		if (ahead < want) {
			sfs_cache_prefetch(p->cache, p->src, region, ahead,
					   want - ahead, 0);
			ahead = want;
		}
		struct sfs_chunk *ch;
		const uint8_t *data;
		size_t avail;
		int rc = sfs_cache_get(p->cache, p->src, region, roff, &ch,
				       &data, &avail);
		if (rc)
			return rc;
		size_t n = (size_t)SFS_MIN((uint64_t)avail, len);
		for (size_t done = 0; done < n;) {
			ssize_t w = pwrite(fd, data + done, n - done,
					   (off_t)(at + done));
			if (w < 0) {
				rc = -errno;
				break;
			}
			done += (size_t)w;
		}
		sfs_cache_put(p->cache, ch);
		if (rc)
			return rc;
		sfs_progress_add(&p->prog, n);
		roff += n;
		at += n;
		len -= n;
	}
	return 0;
}

/* Directories last (writing into them changed their times), deepest
 * first; DEST itself is the model's directory. */
static int dir_times(const struct sfs_manifest *m, const char *dest)
{
	char path[SFS_MF_PATH_MAX * 2];
	for (size_t k = m->ndirs + 1; k-- > 0;) {
		const struct sfs_mmeta *mm =
			k ? &m->dir_meta[k - 1] : &m->root_meta;
		if (!mm->has)
			continue;
		snprintf(path, sizeof(path), "%s%s%s", dest, k ? "/" : "",
			 k ? m->dirs[k - 1] : "");
		struct timespec ts[2] = {sfs_ns_timespec(mm->mtime_ns),
					 sfs_ns_timespec(mm->mtime_ns)};
		if (chmod(path, (mode_t)(mm->mode & 0777)) ||
		    utimensat(AT_FDCWD, path, ts, 0))
			return -errno;
	}
	return 0;
}

static int pull_file(struct pull *p, const struct sfs_manifest *m,
		     const struct sfs_mfile *f, const char *dest, char *err,
		     size_t errlen)
{
	char path[SFS_MF_PATH_MAX * 2];
	int fd, rc = 0;

	snprintf(path, sizeof(path), "%s/%s", dest, f->path);
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	if (fd < 0) {
		snprintf(err, errlen, "cannot create %.400s: %s", path,
			 strerror(errno));
		return -errno;
	}
	for (size_t i = 0; i < f->next && !rc; i++) {
		const struct sfs_extent *e = &f->ext[i];
		if (e->kind == SFS_EXT_INLINE) {
			if (pwrite(fd, e->data, e->len, (off_t)e->off) !=
			    (ssize_t)e->len)
				rc = errno ? -errno : -EIO;
			else
				sfs_progress_add(&p->prog, e->len);
		} else {
			rc = copy_region(p, fd, e->region, e->roff, e->len,
					 e->off, m->regions[e->region].len);
		}
	}
	/* The seed's time and permission bits, as cp -a would keep them. */
	if (!rc && f->meta.has) {
		struct timespec ts[2] = {sfs_ns_timespec(f->meta.mtime_ns),
					 sfs_ns_timespec(f->meta.mtime_ns)};
		if (fchmod(fd, (mode_t)(f->meta.mode & 0777)) ||
		    futimens(fd, ts))
			rc = -errno;
	}
	if (close(fd) && !rc)
		rc = -errno;
	if (rc)
		snprintf(err, errlen, "%s: %s", f->path,
			 rc == -EBADMSG ? "bytes do not match the seed's "
					  "checksum"
					: strerror(-rc));
	return rc;
}

int sfs_pull_main(int argc, char **argv)
{
	static const struct option opts[] = {
		{"seed", required_argument, NULL, 's'},
		{"protocol", required_argument, NULL, 'p'},
		{"cache-size", required_argument, NULL, 'c'},
		{"timeout", required_argument, NULL, 't'},
		{"log-level", required_argument, NULL, 'l'},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	const char *seed = NULL, *protocol = NULL;
	uint64_t cache_size = 64u << 20, v;
	unsigned int timeout_ms = 10000;
	char err[SFS_XPORT_ERR_MAX];
	int c;

	sfs_log_set_level("warn");
	optind = 1;
	while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
		switch (c) {
		case 's':
			seed = optarg;
			break;
		case 'p':
			protocol = optarg;
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
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (!seed || argc - optind != 2) {
		usage(stderr);
		return 2;
	}
	const char *name = argv[optind], *dest = argv[optind + 1];
	protocol = sfs_xport_choose(protocol, getenv("SEEDFS_PROTOCOL"));

	char *json = NULL;
	size_t len;
	struct sfs_manifest *m = NULL;
	struct sfs_xport *x = NULL;
	struct pull p = {0};
	struct sfs_cache_region *regs = NULL;
	int rc;

	sfs_control_init();
	if ((rc = sfs_control_get(seed, "/v1/manifest", timeout_ms,
				  SFS_MANIFEST_MAX, &json, &len, err,
				  sizeof(err)))) {
		fprintf(stderr, "seedfs pull: cannot fetch the manifest: %s\n",
			err);
		goto out;
	}
	if ((rc = sfs_manifest_decode(json, len, &m, err, sizeof(err)))) {
		fprintf(stderr, "seedfs pull: bad manifest from %s: %s\n", seed,
			err);
		goto out;
	}
	if (strcmp(m->model, name)) {
		fprintf(stderr,
			"seedfs pull: the seed at %s publishes %s, "
			"not %s\n",
			seed, m->model, name);
		rc = -ENOENT;
		goto out;
	}
	if ((rc = make_dest(dest))) {
		fprintf(stderr, "seedfs pull: %s: %s\n", dest,
			rc == -ENOTEMPTY ? "not empty" : strerror(-rc));
		goto out;
	}
	size_t ep;
	uint64_t peer;
	if ((rc = sfs_control_open(seed, m, protocol, timeout_ms, &x, &ep,
				   &peer, err, sizeof(err)))) {
		fprintf(stderr, "seedfs pull: %s\n", err);
		goto out;
	}
	uint32_t chunk = 1u << 20;
	regs = calloc(m->nregions ? m->nregions : 1, sizeof(*regs));
	if (!regs) {
		rc = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < m->nregions && !rc; i++) {
		const struct sfs_region *r = &m->regions[i];
		regs[i].len = r->len;
		regs[i].raddr = r->rem[ep].raddr;
		regs[i].csum_shift = r->csum_shift;
		regs[i].xxh3 = r->xxh3;
		if (r->csum_shift && (1u << r->csum_shift) > chunk)
			chunk = 1u << r->csum_shift;
		rc = sfs_control_remote_key(x, &r->rem[ep], &regs[i].key);
	}
	p.seed = seed;
	p.x = x;
	p.ep = &m->eps[ep];
	p.timeout_ms = timeout_ms;
	struct sfs_cache_cfg cc = {.xport = x,
				   .size = cache_size,
				   .chunk_size = chunk,
				   .timeout_ms = timeout_ms,
				   .reconnect = reconnect,
				   .reconnect_arg = &p};
	if (!rc && !(rc = sfs_cache_new(&cc, &p.cache, err, sizeof(err)))) {
		sfs_cache_grow(p.cache);
		rc = sfs_cache_add_source(p.cache, peer, seed, regs,
					  m->nregions, &p.src);
	}
	if (rc) {
		fprintf(stderr, "seedfs pull: cannot set up: %s\n",
			strerror(-rc));
		goto out;
	}
	p.window = cache_size / 2;

	uint64_t total = 0;
	for (size_t i = 0; i < m->nfiles; i++)
		total += m->files[i].size;
	char what[300];
	snprintf(what, sizeof(what), "pull %s", m->model);
	sfs_progress_start(&p.prog, what, total);
	for (size_t i = 0; i < m->ndirs && !rc; i++) {
		char path[SFS_MF_PATH_MAX * 2];
		snprintf(path, sizeof(path), "%s/%s", dest, m->dirs[i]);
		if (mkdir(path, 0755) && errno != EEXIST) {
			rc = -errno;
			snprintf(err, sizeof(err), "cannot create %.400s: %s",
				 path, strerror(errno));
		}
	}
	for (size_t i = 0; i < m->nfiles && !rc; i++)
		rc = pull_file(&p, m, &m->files[i], dest, err, sizeof(err));
	if (!rc && (rc = dir_times(m, dest)))
		snprintf(err, sizeof(err), "setting directory times: %s",
			 strerror(-rc));
	sfs_progress_end(&p.prog, rc == 0);
	if (rc)
		fprintf(stderr, "seedfs pull: %s (%s is incomplete)\n", err,
			dest);
out:
	sfs_cache_stop(p.cache);
	sfs_cache_free_quiesced(p.cache, sfs_xport_quiesce(x));
	sfs_xport_close(x);
	free(regs);
	sfs_manifest_free(m);
	free(json);
	return rc ? 1 : 0;
}
