/* SPDX-License-Identifier: MIT */
/*
 * sfs-rawread - the baseline: read every byte a seed publishes with the
 * transport alone (no FUSE, no cache), as fast as it goes.
 *
 *   sfs-rawread --seed HOST:PORT [--protocol NAME] [--chunk SIZE]
 *               [--depth N]
 *
 * Prints "bytes B seconds S GB/s G".  Uses the same manifest fetch,
 * transport and provider as the mount.
 */
#include "common/log.h"
#include "common/util.h"
#include "control/control.h"
#include "metadata/manifest.h"
#include "transports/transport.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

struct slot {
	pthread_mutex_t *lock;
	pthread_cond_t *cond;
	int *inflight;
	int *failed;
};

static void done(void *arg, int status)
{
	struct slot *s = arg;
	pthread_mutex_lock(s->lock);
	if (status)
		*s->failed = status;
	(*s->inflight)--;
	pthread_cond_signal(s->cond);
	pthread_mutex_unlock(s->lock);
}

int main(int argc, char **argv)
{
	const char *seed = NULL, *protocol = NULL;
	uint64_t chunk = 1 << 20, depth = 8;
	char err[512];

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--seed") && i + 1 < argc)
			seed = argv[++i];
		else if (!strcmp(argv[i], "--protocol") && i + 1 < argc)
			protocol = argv[++i];
		else if (!strcmp(argv[i], "--chunk") && i + 1 < argc)
			sfs_parse_size(argv[++i], &chunk);
		else if (!strcmp(argv[i], "--depth") && i + 1 < argc)
			sfs_parse_u64(argv[++i], &depth);
		else {
			fprintf(stderr, "usage: sfs-rawread --seed HOST:PORT "
					"[--protocol NAME] [--chunk SIZE] "
					"[--depth N]\n");
			return 2;
		}
	}
	if (!seed || !chunk || !depth || depth > 1024) {
		fprintf(stderr, "sfs-rawread: --seed HOST:PORT is required\n");
		return 2;
	}
	sfs_log_set_level("warn");
	sfs_control_init();
	char *json;
	size_t len;
	struct sfs_manifest *m;
	if (sfs_control_get(NULL, seed, "/v1/manifest", 10000, SFS_MANIFEST_MAX,
			    &json, &len, err, sizeof(err)) ||
	    sfs_manifest_decode(json, len, &m, err, sizeof(err))) {
		fprintf(stderr, "sfs-rawread: %s\n", err);
		return 1;
	}
	struct sfs_xport *x;
	uint64_t peer;
	size_t ep;
	if (sfs_control_open(NULL, seed, m, protocol, 10000, &x, &ep, &peer,
			     err, sizeof(err))) {
		fprintf(stderr, "sfs-rawread: %s\n", err);
		return 1;
	}
	uint64_t *keys = calloc(m->nregions ? m->nregions : 1, sizeof(*keys));
	for (size_t r = 0; keys && r < m->nregions; r++)
		if (sfs_control_remote_key(x, &m->regions[r].rem[ep],
					   &keys[r])) {
			fprintf(stderr,
				"sfs-rawread: cannot import a raw key\n");
			return 1;
		}
	/* A ring of depth buffers, prefaulted and registered once. */
	size_t buflen = (size_t)(chunk * depth);
	uint8_t *buf = mmap(NULL, buflen, PROT_READ | PROT_WRITE,
			    MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
	struct sfs_xport_mr *mr = NULL;
	if (buf == MAP_FAILED ||
	    sfs_xport_mr_reg(x, buf, buflen, SFS_XPORT_LOCAL_DST, &mr)) {
		fprintf(stderr, "sfs-rawread: cannot set up buffers\n");
		return 1;
	}
	pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
	pthread_cond_t cond = PTHREAD_COND_INITIALIZER;
	int inflight = 0, failed = 0;
	struct slot slot = {&lock, &cond, &inflight, &failed};
	uint64_t bytes = 0, n = 0, t0 = sfs_now_ns();

	for (size_t r = 0; r < m->nregions && !failed; r++) {
		const struct sfs_region *rg = &m->regions[r];
		for (uint64_t off = 0; off < rg->len && !failed; off += chunk) {
			pthread_mutex_lock(&lock);
			while (inflight >= (int)depth)
				pthread_cond_wait(&cond, &lock);
			inflight++;
			pthread_mutex_unlock(&lock);
			struct sfs_xport_rd rd = {
				.local = buf + (n++ % depth) * chunk,
				.lmr = mr,
				.raddr = rg->rem[ep].raddr + off,
				.rkey = keys[r],
				.len = (size_t)SFS_MIN(chunk, rg->len - off),
			};
			int rc = sfs_xport_read(x, peer, &rd, 1, done, &slot);
			if (rc) {
				failed = rc;
				pthread_mutex_lock(&lock);
				inflight--;
				pthread_mutex_unlock(&lock);
				break;
			}
			bytes += rd.len;
		}
	}
	pthread_mutex_lock(&lock);
	while (inflight)
		pthread_cond_wait(&cond, &lock);
	pthread_mutex_unlock(&lock);
	double s = (double)(sfs_now_ns() - t0) / 1e9;
	if (failed) {
		fprintf(stderr, "sfs-rawread: read failed: %s\n",
			strerror(-failed));
		return 1;
	}
	printf("bytes %" PRIu64 " seconds %.3f GB/s %.2f\n", bytes, s,
	       (double)bytes / s / 1e9);
	sfs_xport_quiesce(x);
	sfs_xport_mr_dereg(mr);
	sfs_xport_close(x);
	sfs_manifest_free(m);
	free(json);
	return 0;
}
