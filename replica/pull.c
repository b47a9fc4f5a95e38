/* SPDX-License-Identifier: MIT */
/* pull.c - copy a model to a local directory (pull.h). */
#include "replica/pull_impl.h"

#include "cache/cache.h"
#include "common/log.h"
#include "common/progress.h"
#include "common/util.h"
#include "metadata/manifest.h"
#include "replica/replica.h"
#include "transports/transport.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define PULL_STEP (4u << 20)	 /* bytes pinned and written at once */
#define PLACE_STEP (64ull << 20) /* in place: bytes read per batch */

/* What a file or directory the seed published with @mode gets here: its
 * permission bits without set-id and sticky, minus the umask (as cp
 * without -p and tar for non-root do). */
mode_t pull_local_mode(const struct pull *p, uint32_t mode)
{
	return (mode_t)(mode & 0777) & ~p->umask;
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

int pull_copy_range(struct pull *p, int fd, const struct sfs_rfile *f,
		    uint64_t off, uint64_t len)
{
	uint64_t ahead = off, end = off + len;
	for (uint64_t pos = off; pos < end;) {
		uint64_t want = SFS_MIN(pos + p->window, end);
		if (ahead < want) {
			sfs_replica_fetch(p->r, f, ahead, want - ahead);
			ahead = want;
		}
		struct sfs_rvec v;
		sfs_rvec_init(&v);
		int rc = sfs_replica_read(
			p->r, (struct sfs_rfile *)f, pos,
			SFS_MIN((uint64_t)PULL_STEP, end - pos), &v);
		uint64_t at = pos;
		for (size_t i = 0; !rc && i < v.n; i++) {
			const uint8_t *data = v.iov[i].iov_base;
			size_t n = v.iov[i].iov_len;
			for (size_t done = 0; done < n;) {
				ssize_t w = pwrite(fd, data + done, n - done,
						   (off_t)(at + done));
				if (w < 0) {
					rc = -errno;
					break;
				}
				done += (size_t)w;
			}
			at += n;
		}
		sfs_rvec_release(p->r, &v);
		if (rc)
			return rc;
		if (at == pos)
			return -EIO; /* nothing came: never loop */
		sfs_progress_add(&p->prog, at - pos);
		pos = at;
	}
	return 0;
}

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif
#define POPULATE_STEP (16u << 20)

struct populate {
	uint8_t *map;
	uint64_t len;
	atomic_int stop;
};

/* Fault the mapping's pages in ahead of the pulls, on another core:
 * creating them (zeroed) costs as much as the transport's copy. */
static void *populate(void *arg)
{
	struct populate *po = arg;
	for (uint64_t at = 0; at < po->len && !atomic_load(&po->stop);
	     at += POPULATE_STEP)
		if (madvise(po->map + at, SFS_MIN(POPULATE_STEP, po->len - at),
			    MADV_POPULATE_WRITE))
			break; /* an old kernel: the pulls fault them */
	return NULL;
}

/*
 * Pull @f straight into the file's shared mapping: the pulls land in
 * its pages and are verified there (sfs_cache_read_into), nothing is
 * copied or written again.  The mapping is registered where the
 * provider needs that.  Returns 0, -errno of the pull, or 1 when it
 * cannot be done in place (the caller copies instead).
 */
static int in_place(struct pull *p, int fd, const struct sfs_rfile *f)
{
	struct sfs_cache *c = sfs_replica_cache(p->r);
	struct sfs_xport *x = sfs_replica_xport(p->r);
	struct sfs_xport_info info;
	struct sfs_xport_mr *mr = NULL;
	struct sfs_cache_dst *dst = NULL;
	struct populate po;
	pthread_t th;
	int popping = 0;
	uint8_t *map;
	int rc;

	if (ftruncate(fd, (off_t)f->size))
		return -errno;
	map = mmap(NULL, f->size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (map == MAP_FAILED) {
		SFS_LOG(SFS_INFO, "pull", "%s: cannot map it (%s): copying",
			f->file->path, strerror(errno));
		return 1;
	}
	sfs_xport_info(x, &info);
	if (info.local_mr &&
	    (rc = sfs_xport_mr_reg(x, map, f->size, SFS_XPORT_LOCAL_DST,
				   &mr))) {
		SFS_LOG(SFS_INFO, "pull",
			"%s: cannot register its mapping (%s): copying",
			f->file->path, strerror(-rc));
		munmap(map, f->size);
		return 1;
	}
	if ((rc = sfs_cache_dst_new(c, map, f->size, mr, &dst)))
		goto out;
	po.map = map;
	po.len = f->size;
	atomic_init(&po.stop, 0);
	popping = !pthread_create(&th, NULL, populate, &po);
	/* In steps, for the progress line; each step one batch whose pulls
	 * are all in flight together. */
	for (uint64_t pos = 0; pos < f->size && !rc;) {
		uint64_t n = SFS_MIN(PLACE_STEP, f->size - pos);
		struct sfs_cache_rd rd = {.set = f->set,
					  .obj = f->obj,
					  .off = pos,
					  .len = n,
					  .to = map + pos,
					  .dst = dst};
		rc = sfs_cache_read_into(c, &rd, 1, p->window);
		pos += n;
		if (!rc)
			sfs_progress_add(&p->prog, n);
	}
out:
	if (popping) {
		atomic_store(&po.stop, 1);
		pthread_join(th, NULL);
	}
	if (sfs_cache_dst_free(dst) == -EBUSY) {
		/* A timed-out pull may still land: the mapping stays, and
		 * its registration until the transport's reads are ended
		 * (the process ends soon). */
		sfs_replica_keep_mr(p->r, mr);
		return rc ? rc : -ETIMEDOUT;
	}
	sfs_xport_mr_dereg(mr);
	if (munmap(map, f->size) && !rc)
		rc = -errno;
	return rc;
}

/* Directories last (writing into them changed their times), deepest
 * first; DEST itself is the model's directory. */
int pull_dir_times(const struct pull *p, const char *dest)
{
	const struct sfs_manifest *m = p->m;
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
		if (chmod(path, pull_local_mode(p, mm->mode)) ||
		    utimensat(AT_FDCWD, path, ts, 0))
			return -errno;
	}
	return 0;
}

static int pull_file(struct pull *p, size_t idx, const char *dest, char *err,
		     size_t errlen)
{
	const struct sfs_mfile *f = &p->m->files[idx];
	char path[SFS_MF_PATH_MAX * 2];
	int fd, rc = 0;

	snprintf(path, sizeof(path), "%s/%s", dest, f->path);
	fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	if (fd < 0) {
		snprintf(err, errlen, "cannot create %.400s: %s", path,
			 strerror(errno));
		return -errno;
	}
	struct sfs_rfile rf;
	sfs_replica_rfile(p->view, idx, &rf);
	rc = !rf.size ? 0 : p->copy ? 1 : in_place(p, fd, &rf);
	if (rc == 1) {
		p->copy = 1;
		rc = pull_copy_range(p, fd, &rf, 0, rf.size);
	}
	/* The seed's time, and its permission bits under the umask. */
	if (!rc && f->meta.has) {
		struct timespec ts[2] = {sfs_ns_timespec(f->meta.mtime_ns),
					 sfs_ns_timespec(f->meta.mtime_ns)};
		if (fchmod(fd, pull_local_mode(p, f->meta.mode)) ||
		    futimens(fd, ts))
			rc = -errno;
	}
	if (close(fd) && !rc)
		rc = -errno;
	if (!rc)
		return 0;
	/* No file by the target's name that looks complete: the one that
	 * failed goes (in place it had its full size from the start). */
	if (unlink(path) && errno != ENOENT)
		SFS_LOG(SFS_WARN, "pull", "cannot remove %s: %s", path,
			strerror(errno));
	snprintf(err, errlen, "%s: %s", f->path,
		 rc == -EBADMSG ? "bytes do not match the seed's checksum"
				: strerror(-rc));
	return rc;
}

/* The seed left entries out of @m for their names: -ENOENT with them
 * (escaped, as the manifest has them) in @err. */
int pull_left_out(const struct sfs_manifest *m, char *err, size_t errlen)
{
	size_t l = (size_t)snprintf(err, errlen,
				    "the seed left out %" PRIu64 " %s whose "
				    "names it cannot publish (see its log):",
				    m->nskipped,
				    m->nskipped == 1 ? "entry" : "entries");
	for (size_t i = 0; i < m->nskipped_shown && l < errlen; i++)
		l += (size_t)snprintf(err + l, errlen - l, "%s %s",
				      i ? "," : "", m->skipped[i]);
	if (m->nskipped > m->nskipped_shown && l < errlen)
		snprintf(err + l, errlen - l, ", ...");
	return -ENOENT;
}

int sfs_pull(struct sfs_replica *r, const char *name, const char *dest,
	     const struct sfs_pull_cfg *cfg, char *err, size_t errlen)
{
	struct pull p = {.r = r,
			 .window = cfg->window,
			 .copy = !cfg->place,
			 .strong = cfg->strong,
			 .umask = sfs_umask()};
	int rc = sfs_replica_current(r, name, &p.view, &p.m);

	if (errlen)
		err[0] = '\0';

	if (rc) {
		char seeds[512], models[512];
		snprintf(err, errlen,
			 "%s publishes no model %s (it publishes %s)",
			 sfs_replica_seeds(r, seeds, sizeof(seeds)), name,
			 sfs_replica_models(r, models, sizeof(models)));
		return rc;
	}
	if (cfg->update) {
		rc = pull_update(&p, dest, err, errlen);
		if (cfg->stats)
			*cfg->stats = (struct sfs_pull_stats){
				.generation = p.m->generation,
				.kept_files = p.kept_files,
				.changed_files = p.changed_files,
				.kept_bytes = p.kept_bytes,
				.pulled_bytes = p.pulled_bytes};
		sfs_replica_unref(r, p.view);
		return rc;
	}
	if ((rc = make_dest(dest))) {
		snprintf(err, errlen, "%s: %s", dest,
			 rc == -ENOTEMPTY ? "not empty" : strerror(-rc));
		sfs_replica_unref(r, p.view);
		return rc;
	}
	const struct sfs_manifest *m = p.m;
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
			snprintf(err, errlen, "cannot create %.400s: %s", path,
				 strerror(errno));
		}
	}
	for (size_t i = 0; i < m->nfiles && !rc; i++)
		rc = pull_file(&p, i, dest, err, errlen);
	if (!rc && (rc = pull_dir_times(&p, dest)))
		snprintf(err, errlen, "setting directory times: %s",
			 strerror(-rc));
	if (!rc && m->nskipped)
		rc = pull_left_out(m, err, errlen);
	sfs_progress_end(&p.prog, rc == 0);
	if (rc) {
		size_t l = strlen(err);
		snprintf(err + l, errlen - l, " (%s is incomplete)", dest);
	}
	sfs_replica_unref(r, p.view);
	return rc;
}
