/* SPDX-License-Identifier: MIT */
/*
 * sums.c - a published file's digest and checksums (publish.h,
 * seed_sums_*): XXH3-64 of the whole file and of every chunk, and the
 * chunks' SHA-256, on every CPU at once.  What they read may be a
 * mapping of a file that shrinks under it: every read is guarded
 * (guard.h), and a fault is -EFAULT with the address it read.
 */
#include "seed/publish.h"

#include "common/util.h"
#include "common/xxh.h"
#include "metadata/manifest.h"
#include "seed/guard.h"

#include <errno.h>
#include <gnutls/crypto.h>
#include <gnutls/gnutls.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int seed_sums_start(struct seed_sums *ss, uint32_t shift, int sha256)
{
	memset(ss, 0, sizeof(*ss));
	ss->shift = shift;
	if (!(ss->whole = XXH3_createState()) ||
	    (shift && !(ss->chunk = XXH3_createState())) ||
	    (shift && sha256 &&
	     gnutls_hash_init((gnutls_hash_hd_t *)&ss->sha,
			      GNUTLS_DIG_SHA256))) {
		ss->sha = NULL;
		seed_sums_free(ss);
		return -ENOMEM;
	}
	XXH3_64bits_reset(ss->whole);
	if (ss->chunk)
		XXH3_64bits_reset(ss->chunk);
	return 0;
}

/* One chunk's sums: its XXH3-64 @v, and with SHA-256 what @sha holds
 * (read out, and so reset). */
static int sums_push(struct seed_sums *ss, uint64_t v, const void *whole,
		     uint64_t len)
{
	if (sfs_grow((void **)&ss->sums, &ss->cap, ss->n + 1,
		     sizeof(ss->sums[0])))
		return -ENOMEM;
	if (ss->sha) {
		if (sfs_grow((void **)&ss->shas, &ss->sha_cap, 32 * (ss->n + 1),
			     1))
			return -ENOMEM;
		uint8_t *out = ss->shas + 32 * ss->n;
		if (whole ? gnutls_hash_fast(GNUTLS_DIG_SHA256, whole,
					     (size_t)len, out)
			  : (gnutls_hash_output((gnutls_hash_hd_t)ss->sha, out),
			     0))
			return -EIO;
	}
	ss->sums[ss->n++] = v;
	return 0;
}

/* Whole chunks [from, to) of @p, hashed by one thread of
 * sums_parallel. */
struct sums_job {
	const uint8_t *p;
	uint64_t cs, from, to;
	uint64_t *sums;
	uint8_t *shas; /* NULL: no SHA-256 */
	int err;
	const void *fault; /* err -EFAULT: the address read */
	atomic_int *stop;  /* set at the first job's error: the rest stop */
	pthread_t t;
};

/* Guarded (guard.h): the file may shrink under it. */
static int sums_job_hash(void *arg)
{
	struct sums_job *j = arg;
	for (uint64_t k = j->from; k < j->to; k++) {
		if (atomic_load_explicit(j->stop, memory_order_relaxed))
			return -ECANCELED; /* another job's error stands */
		const uint8_t *c = j->p + k * j->cs;
		j->sums[k] = XXH3_64bits(c, (size_t)j->cs);
		if (j->shas &&
		    gnutls_hash_fast(GNUTLS_DIG_SHA256, c, (size_t)j->cs,
				     j->shas + 32 * k))
			return -EIO;
	}
	return 0;
}

static void *sums_job_run(void *arg)
{
	struct sums_job *j = arg;
	j->err = sfs_guard_run(sums_job_hash, j, j->p + j->from * j->cs,
			       (size_t)((j->to - j->from) * j->cs), &j->fault);
	if (j->err)
		atomic_store(j->stop, 1);
	return NULL;
}

/* The whole file's digest over @len bytes at @p (guarded). */
struct sums_whole {
	struct XXH3_state_s *st;
	const uint8_t *p;
	uint64_t len;
};

static int sums_whole_add(void *arg)
{
	struct sums_whole *w = arg;
	XXH3_64bits_update(w->st, w->p, (size_t)w->len);
	return 0;
}

/* Below this many whole chunks a file is hashed on one thread. */
#define SUMS_PARALLEL_MIN 16
#define SUMS_THREADS_MAX 16

/*
 * The @n whole chunks at @p (ss->fill 0): their sums, and SHA-256s, on
 * every CPU at once (SHA-256 runs at 1.6-1.8 GB/s a core here: a seed
 * of 140 GB would take 80 s on one), the whole file's digest on this
 * thread meanwhile.  0, -ENOMEM or -EIO.
 */
static int sums_parallel(struct seed_sums *ss, const uint8_t *p, uint64_t n)
{
	uint64_t cs = 1ull << ss->shift;
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	size_t nt = cpus > 1 ? (size_t)cpus : 1;
	nt = SFS_MIN(nt, (size_t)SUMS_THREADS_MAX);
	nt = SFS_MIN(nt, (size_t)(n / (SUMS_PARALLEL_MIN / 2)));
	if (sfs_grow((void **)&ss->sums, &ss->cap, ss->n + n,
		     sizeof(ss->sums[0])) ||
	    (ss->sha &&
	     sfs_grow((void **)&ss->shas, &ss->sha_cap, 32 * (ss->n + n), 1)))
		return -ENOMEM;
	struct sums_job jobs[SUMS_THREADS_MAX];
	atomic_int stop = 0;
	size_t started = 0;
	int rc = 0;
	for (size_t i = 0; i < nt; i++) {
		jobs[i] = (struct sums_job){
			.p = p,
			.cs = cs,
			.from = n * i / nt,
			.to = n * (i + 1) / nt,
			.sums = ss->sums + ss->n,
			.shas = ss->sha ? ss->shas + 32 * ss->n : NULL,
			.stop = &stop};
		if (pthread_create(&jobs[i].t, NULL, sums_job_run, &jobs[i]))
			sums_job_run(&jobs[i]); /* here, then */
		else
			started |= (size_t)1 << i;
	}
	/* Every job is joined, whatever this thread's read met. */
	struct sums_whole w = {ss->whole, p, n * cs};
	rc = sfs_guard_run(sums_whole_add, &w, p, (size_t)(n * cs), &ss->fault);
	if (rc)
		atomic_store(&stop, 1);
	for (size_t i = 0; i < nt; i++) {
		if (started >> i & 1)
			pthread_join(jobs[i].t, NULL);
		if (!rc && jobs[i].err && jobs[i].err != -ECANCELED) {
			rc = jobs[i].err;
			ss->fault = jobs[i].fault;
		}
	}
	ss->n += n;
	return rc;
}

struct sums_seq {
	struct seed_sums *ss;
	const uint8_t *p;
	uint64_t len;
};

static int sums_seq_add(void *arg);

int seed_sums_add(struct seed_sums *ss, const void *data, uint64_t len)
{
	const uint8_t *p = data;
	if (ss->shift && !ss->fill && len >> ss->shift >= SUMS_PARALLEL_MIN) {
		uint64_t n = len >> ss->shift;
		int rc = sums_parallel(ss, p, n);
		if (rc)
			return rc;
		p += n << ss->shift;
		len -= n << ss->shift;
	}
	struct sums_seq q = {ss, p, len};
	return sfs_guard_run(sums_seq_add, &q, p, (size_t)len, &ss->fault);
}

/* What sums_parallel left, on this thread (guarded: the file may shrink
 * under it; what it grows is @ss's, freed by seed_sums_free). */
static int sums_seq_add(void *arg)
{
	struct sums_seq *q = arg;
	struct seed_sums *ss = q->ss;
	const uint8_t *p = q->p;
	uint64_t len = q->len;
	XXH3_64bits_update(ss->whole, p, (size_t)len);
	if (!ss->shift)
		return 0;
	uint64_t cs = 1ull << ss->shift;
	while (len) {
		/* Whole chunks hash in one call; a chunk split across calls
		 * goes through the streaming states. */
		if (!ss->fill && len >= cs) {
			if (sums_push(ss, XXH3_64bits(p, (size_t)cs), p, cs))
				return -ENOMEM;
			p += cs;
			len -= cs;
			continue;
		}
		uint64_t take = SFS_MIN(len, cs - ss->fill);
		XXH3_64bits_update(ss->chunk, p, (size_t)take);
		if (ss->sha &&
		    gnutls_hash((gnutls_hash_hd_t)ss->sha, p, (size_t)take))
			return -EIO;
		ss->fill += take;
		p += take;
		len -= take;
		if (ss->fill == cs) {
			if (sums_push(ss, XXH3_64bits_digest(ss->chunk), NULL,
				      0))
				return -ENOMEM;
			XXH3_64bits_reset(ss->chunk);
			ss->fill = 0;
		}
	}
	return 0;
}

int seed_sums_finish(struct seed_sums *ss, struct sfs_manifest *m, size_t fidx)
{
	struct sfs_mfile *f = &m->files[fidx];
	f->xxh3 = XXH3_64bits_digest(ss->whole);
	f->has_xxh3 = 1;
	if (!ss->shift)
		return 0;
	/* The last chunk, shorter. */
	if (ss->fill && sums_push(ss, XXH3_64bits_digest(ss->chunk), NULL, 0))
		return -ENOMEM;
	int rc =
		sfs_manifest_set_checksums(m, fidx, ss->shift, ss->sums, ss->n);
	if (!rc && ss->sha)
		rc = sfs_manifest_set_sha256(m, fidx, ss->shas, ss->n);
	return rc;
}

void seed_sums_free(struct seed_sums *ss)
{
	if (ss->whole)
		XXH3_freeState(ss->whole);
	if (ss->chunk)
		XXH3_freeState(ss->chunk);
	if (ss->sha)
		gnutls_hash_deinit((gnutls_hash_hd_t)ss->sha, NULL);
	free(ss->sums);
	free(ss->shas);
	memset(ss, 0, sizeof(*ss));
}
