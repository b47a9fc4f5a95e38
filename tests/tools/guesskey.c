/* SPDX-License-Identifier: MIT */
/*
 * guesskey - an attacker that knows where a seed's memory is but not its
 * key: read a region of the seed with guessed keys, each of which the
 * provider must refuse, then (as a control) with the real one.
 *
 *   guesskey --seed HOST:PORT [--protocol NAME]
 *   guesskey --keys FILE [--seed HOST:PORT] [--protocol NAME]
 *
 * The guesses: 0 to 7 (what sequential keys would be), and the real
 * key with one bit flipped, plus or minus one.  A guess is refused when
 * not one byte of the seed's memory arrived: an error, or no completion
 * within a second (libfabric tcp drops the connection on a bad key
 * rather than answering it) with the buffer untouched.  The region's address is
 * taken from the manifest: the attacker is given everything but the
 * key.  Prints "guesskey: N guesses refused (...), the real key reads"
 * and exits 0; exits 1 if a guess read anything.
 *
 * With --keys: an attacker that kept a manifest (FILE, as a seed served
 * it, or a re-seeder's with its slab in regions[0]) tries its keys
 * later: "keys read" and exit 0 when region 0 reads with them, "keys
 * refused: WHY" and exit 3 when not (rotation revoked them).
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
#include <unistd.h>

struct wait {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	int done, status;
};

static void done(void *arg, int status)
{
	struct wait *w = arg;
	pthread_mutex_lock(&w->lock);
	w->done = 1;
	w->status = status;
	pthread_cond_signal(&w->cond);
	pthread_mutex_unlock(&w->lock);
}

/* One read of 4 KiB with @key: 0, its error, or -ETIMEDOUT (1 s). */
static int try_read(struct sfs_xport *x, uint64_t peer, void *buf,
		    struct sfs_xport_mr *mr, uint64_t raddr, uint64_t key)
{
	/* On the heap: a read that never completes keeps it (leaked, the
	 * transport may still call back). */
	struct wait *w = calloc(1, sizeof(*w));
	if (!w)
		return -ENOMEM;
	pthread_mutex_init(&w->lock, NULL);
	sfs_cond_init(&w->cond); /* sfs_abstime is monotonic */
	struct sfs_xport_rd rd = {.local = buf,
				  .lmr = mr,
				  .raddr = raddr,
				  .rkey = key,
				  .len = 4096};
	/* A connection being made answers -EAGAIN: posted again (2 s). */
	int rc;
	for (int i = 0;
	     (rc = sfs_xport_read(x, peer, &rd, 1, done, w)) == -EAGAIN &&
	     i < 200;
	     i++)
		usleep(10000);
	if (rc) {
		free(w);
		return rc;
	}
	struct timespec ts = sfs_abstime(1000);
	pthread_mutex_lock(&w->lock);
	while (!w->done && !rc)
		rc = pthread_cond_timedwait(&w->cond, &w->lock, &ts);
	int finished = w->done;
	rc = finished ? w->status : -ETIMEDOUT;
	pthread_mutex_unlock(&w->lock);
	if (finished)
		free(w);
	return rc;
}

/* One attempt with @key on a transport of its own (a guess must reach
 * the seed, not fail on a connection an earlier guess broke): 0 when
 * bytes of the seed arrived, else why not. */
static int attempt(const char *seed, const struct sfs_manifest *m,
		   const char *protocol, uint64_t key, int real, char *why,
		   size_t whylen)
{
	struct sfs_xport *x;
	struct sfs_xport_mr *mr = NULL;
	uint64_t peer, rkey;
	size_t ep;
	char err[512];
	if (sfs_control_open(NULL, seed, m, protocol, 10000, &x, &ep, &peer,
			     err, sizeof(err))) {
		snprintf(why, whylen, "%s", err);
		return -EIO;
	}
	if (sfs_control_remote_key(x, &m->regions[0].rem[ep], &rkey)) {
		snprintf(why, whylen, "no plain key");
		sfs_xport_close(x);
		return -EIO;
	}
	uint8_t *buf = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
			    MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
	if (buf == MAP_FAILED ||
	    sfs_xport_mr_reg(x, buf, 4096, SFS_XPORT_LOCAL_DST, &mr)) {
		snprintf(why, whylen, "cannot set up a buffer");
		if (buf != MAP_FAILED)
			munmap(buf, 4096);
		sfs_xport_close(x);
		return -EIO;
	}
	memset(buf, 0xa5, 4096);
	int rc = try_read(x, peer, buf, mr, m->regions[0].rem[ep].raddr,
			  real ? rkey : key);
	int touched = 0;
	for (size_t k = 0; k < 4096; k++)
		touched |= buf[k] != 0xa5;
	snprintf(why, whylen, "%s", rc ? strerror(-rc) : "read");
	if (rc != -ETIMEDOUT) {
		sfs_xport_quiesce(x);
		sfs_xport_mr_dereg(mr);
		sfs_xport_close(x);
		munmap(buf, 4096);
	} /* else left to the transport: the process ends soon */
	return rc || !touched ? (rc ? rc : -ENODATA) : 0;
}

/* The whole of @path (at most @cap bytes) [new, NUL-terminated], or
 * NULL. */
static char *slurp(const char *path, size_t cap, size_t *len)
{
	FILE *f = fopen(path, "rb");
	char *buf = f ? malloc(cap + 1) : NULL;
	size_t n = buf ? fread(buf, 1, cap + 1, f) : 0;
	if (f)
		fclose(f);
	if (!buf || n > cap) {
		free(buf);
		return NULL;
	}
	buf[n] = '\0';
	*len = n;
	return buf;
}

/* --keys FILE: the keys of a kept manifest, tried once. */
static int kept_keys(const char *file, const char *seed, const char *protocol)
{
	char err[512], why[512];
	size_t len;
	char *json = slurp(file, SFS_MANIFEST_MAX, &len);
	struct sfs_manifest *m = NULL;
	if (!json || sfs_manifest_decode(json, len, &m, err, sizeof(err))) {
		fprintf(stderr, "guesskey: %s: %s\n", file,
			json ? err : "cannot read");
		free(json);
		return 2;
	}
	free(json);
	int rc = m->nregions ? attempt(seed ? seed : "127.0.0.1:1", m, protocol,
				       0, 1, why, sizeof(why))
			     : -EINVAL;
	if (rc)
		printf("guesskey: keys refused: %s\n",
		       m->nregions ? why : "no region");
	else
		printf("guesskey: keys read\n");
	fflush(stdout);
	sfs_manifest_free(m);
	return rc ? 3 : 0;
}

int main(int argc, char **argv)
{
	const char *seed = NULL, *protocol = NULL, *keys = NULL;
	char err[512], why[512];

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--seed") && i + 1 < argc)
			seed = argv[++i];
		else if (!strcmp(argv[i], "--protocol") && i + 1 < argc)
			protocol = argv[++i];
		else if (!strcmp(argv[i], "--keys") && i + 1 < argc)
			keys = argv[++i];
		else {
			fprintf(stderr, "usage: guesskey --seed HOST:PORT "
					"[--protocol NAME] [--keys FILE]\n");
			return 2;
		}
	}
	sfs_log_set_level("err");
	sfs_control_init();
	if (keys)
		return kept_keys(keys, seed, protocol);
	if (!seed)
		return 2;
	char *json;
	size_t len;
	struct sfs_manifest *m;
	if (sfs_control_get(NULL, seed, "/v1/manifest", 10000, SFS_MANIFEST_MAX,
			    &json, &len, err, sizeof(err)) ||
	    sfs_manifest_decode(json, len, &m, err, sizeof(err))) {
		fprintf(stderr, "guesskey: %s\n", err);
		return 1;
	}
	int status = 0;
	if (!m->nregions) {
		fprintf(stderr, "guesskey: no region\n");
		status = 1;
		goto out;
	}
	/* The control first: the real key reads. */
	if (attempt(seed, m, protocol, 0, 1, why, sizeof(why))) {
		printf("guesskey: FAIL: the real key did not read: %s\n", why);
		status = 1;
		goto out;
	}
	uint64_t key = m->regions[0].rem[0].key;
	uint64_t guesses[8 + 3];
	size_t n = 0, timeouts = 0;
	for (uint64_t k = 0; k < 8; k++)
		guesses[n++] = k;
	guesses[n++] = key ^ 1;
	guesses[n++] = key + 1;
	guesses[n++] = key - 1;
	char first[512] = "";
	for (size_t i = 0; i < n; i++) {
		int rc = attempt(seed, m, protocol, guesses[i], 0, why,
				 sizeof(why));
		if (!rc) {
			printf("guesskey: FAIL: key 0x%" PRIx64
			       " (guessed) read the seed's memory\n",
			       guesses[i]);
			status = 1;
			goto out;
		}
		timeouts += rc == -ETIMEDOUT;
		if (!*first)
			snprintf(first, sizeof(first), "%s", why);
	}
	printf("guesskey: %zu guesses refused (first: %s; %zu with no answer "
	       "and nothing written), the real key reads\n",
	       n, first, timeouts);
out:
	fflush(stdout);
	sfs_manifest_free(m);
	free(json);
	return status;
}
