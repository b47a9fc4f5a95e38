/* SPDX-License-Identifier: MIT */
/*
 * A republish from disk reads only the files that changed: a file the
 * generation before read, still the same inode with the same size and
 * times, and neither withdrawn nor unwatched since, keeps that
 * generation's checksums (whole-file digest, per-chunk XXH3 and
 * SHA-256, per-tensor XXH3); its bytes are not read again.
 *
 * What "the same" rests on: every write(2) and every first write to a
 * clean page of a shared mapping sets mtime and ctime; a rename, a copy
 * or a truncation gives another inode or size.  So before its stat, a
 * file's dirty pages are put under write-out (seed_reuse_ready): a page
 * a mapping dirtied earlier is write-protected, its next write faults.
 * Only on local filesystems that keep times so: tmpfs never cleans a
 * mapped page (its second write moves no time), and a network or FUSE
 * filesystem's times come from another clock.  A write in the same
 * clock tick as the stat would leave the times as they were: a file
 * whose times were less than SEED_REUSE_RACY_NS before it is read again
 * (git's "racily clean" rule).  A first generation is read without the
 * write-out (a fresh download's pages are the kernel's to write): its
 * files are read again once, by the next.
 */
#include "seed/publish.h"

#include "common/util.h"
#include "metadata/manifest.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <linux/magic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/vfs.h>
#include <time.h>

struct seed_reuse {
	const struct seed_gen *g; /* the generation before [borrowed] */
	json_t *by_path;	  /* manifest path -> index into g->files */
	size_t *t0, *tn;	  /* per manifest file of g: its tensors */
	uint32_t csum_shift;
	int sha256;
	const char *corrupt; /* tests: the file made corrupt, never taken */
};

int64_t seed_reuse_now_ns(void)
{
	struct timespec now;
	clock_gettime(CLOCK_REALTIME, &now);
	return sfs_timespec_ns(now);
}

int seed_reuse_ready(int fd)
{
	struct statfs sf;
	if (fstatfs(fd, &sf))
		return 0;
	switch ((unsigned long)sf.f_type) {
	case EXT4_SUPER_MAGIC: /* ext2, ext3 too */
	case XFS_SUPER_MAGIC:
	case BTRFS_SUPER_MAGIC:
		break;
	default:
		return 0;
	}
	return !sync_file_range(
		fd, 0, 0, SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE);
}

int seed_reuse_new(const struct seed_gen *prev, const struct sfs_seed_cfg *cfg,
		   struct seed_reuse **out)
{
	*out = NULL;
	if (!prev || !prev->nfiles || cfg->mem)
		return 0;
	const struct sfs_manifest *m = prev->m;
	struct seed_reuse *r = calloc(1, sizeof(*r));
	if (!r)
		return -ENOMEM;
	r->g = prev;
	r->csum_shift = cfg->csum_shift;
	r->sha256 = cfg->digest_sha256;
	r->corrupt = cfg->test_corrupt_path;
	if (!(r->by_path = json_object()) ||
	    !(r->t0 = calloc(m->nfiles ? m->nfiles : 1, sizeof(*r->t0))) ||
	    !(r->tn = calloc(m->nfiles ? m->nfiles : 1, sizeof(*r->tn))))
		goto err;
	for (size_t k = 0; k < prev->nfiles; k++) {
		size_t fi = prev->files[k].fidx;
		if (fi >= m->nfiles)
			continue; /* not of its manifest: never taken */
		if (json_object_set_new_nocheck(r->by_path, m->files[fi].path,
						json_integer((json_int_t)k)))
			goto err;
	}
	/* Each file's tensors were added together, in order: a file whose
	 * tensors are not one run takes none (they are hashed). */
	for (size_t i = 0; i < m->ntensors; i++) {
		size_t fi = m->tensors[i].file;
		if (fi >= m->nfiles)
			continue;
		if (!r->tn[fi]) {
			r->t0[fi] = i;
			r->tn[fi] = 1;
		} else if (r->t0[fi] + r->tn[fi] == i) {
			r->tn[fi]++;
		} else {
			r->tn[fi] = SIZE_MAX; /* not one run */
		}
	}
	*out = r;
	return 0;
err:
	seed_reuse_free(r);
	return -ENOMEM;
}

void seed_reuse_free(struct seed_reuse *r)
{
	if (!r)
		return;
	json_decref(r->by_path);
	free(r->t0);
	free(r->tn);
	free(r);
}

const struct seed_file *seed_reuse_find(const struct seed_reuse *r,
					const char *rel,
					const struct seed_file *f)
{
	json_t *v;
	if (!r || !(v = json_object_get(r->by_path, rel)))
		return NULL;
	const struct seed_file *p = &r->g->files[json_integer_value(v)];
	const struct sfs_mfile *o = &r->g->m->files[p->fidx];
	int64_t touched = SFS_MAX(p->mtime_ns, p->ctime_ns);
	if (!p->reusable || p->withdrawn || p->wd <= 0 || !p->nmr ||
	    !p->read_ns || p->dev != f->dev || p->ino != f->ino ||
	    p->size != f->size || p->mtime_ns != f->mtime_ns ||
	    p->ctime_ns != f->ctime_ns ||
	    p->read_ns - touched < SEED_REUSE_RACY_NS)
		return NULL;
	if (!o->has_xxh3 || o->size != f->size ||
	    o->csum_shift != r->csum_shift || (r->csum_shift && !o->sums) ||
	    !!o->sha256 != !!r->sha256 ||
	    (r->corrupt && !strcmp(r->corrupt, rel)))
		return NULL;
	return p;
}

int seed_reuse_tensor(const struct seed_reuse *r, const struct seed_file *p,
		      size_t i, const char *name, uint64_t off, uint64_t len,
		      uint64_t *xxh3)
{
	const struct sfs_manifest *m = r->g->m;
	size_t n = r->tn[p->fidx];
	if (n == SIZE_MAX || i >= n)
		return 0;
	const struct sfs_mtensor *t = &m->tensors[r->t0[p->fidx] + i];
	if (!t->has_xxh3 || t->off != off || t->len != len ||
	    strcmp(t->name, name))
		return 0;
	*xxh3 = t->xxh3;
	return 1;
}

const struct sfs_mfile *seed_reuse_mfile(const struct seed_reuse *r,
					 const struct seed_file *p)
{
	return &r->g->m->files[p->fidx];
}

int seed_reuse_take(struct sfs_manifest *m, size_t fidx,
		    const struct sfs_mfile *o)
{
	struct sfs_mfile *f = &m->files[fidx];
	f->xxh3 = o->xxh3;
	f->has_xxh3 = 1;
	if (!o->csum_shift)
		return 0;
	size_t n = sfs_csum_count(o->size, o->csum_shift);
	int rc = sfs_manifest_set_checksums(m, fidx, o->csum_shift, o->sums, n);
	if (!rc && o->sha256)
		rc = sfs_manifest_set_sha256(m, fidx, o->sha256, n);
	return rc;
}
