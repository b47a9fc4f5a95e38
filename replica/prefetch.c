/* SPDX-License-Identifier: MIT */
#include "replica/prefetch.h"

#include "cache/cache.h"
#include "common/log.h"
#include "common/util.h"
#include "replica/model.h"
#include "replica/replica.h"
#include "replica/tree.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define WINDOW_MAX (64ull << 20) /* bytes in flight ahead */
#define LISTED_WAIT_MS 3000
#define LANES_SETTLE_MS 250
#define QUEUE_STEP_CHUNKS 8 /* queued at once as the slab grows */

/* One file to warm, pinned to its generation by a view reference. */
struct item {
	const struct sfs_mfile *file;
	uint32_t set, obj;
	struct sfs_view *view;
	/* The node's, for messages [owned]: the node itself may go while
	 * the view is held (a later generation that kept it went). */
	char *path;
};

struct warm {
	struct sfs_replica *r;
	const struct sfs_prefetch_cb *cb;
	struct item *items;
	size_t n, cap;
	uint64_t total, done, budget;
	int whole; /* every byte of what it warms fits */
	uint64_t window, chunk;
	size_t queue_max; /* disk tier: chunks waiting to be written */
	unsigned int timeout_ms;
	int room_late; /* the slab stopped growing: no more waits for it */
	uint64_t base; /* bytes the cache held when it began */
};

/* Add the files at and under @ino (the tree lock held). */
static int collect(struct warm *w, uint64_t ino)
{
	const struct sfs_node *n = sfs_tree_get(sfs_replica_tree(w->r), ino);
	if (n->kind == SFS_NODE_DIR) {
		for (size_t i = 0; i < n->nchild; i++) {
			int rc = collect(w, n->child[i]);
			if (rc)
				return rc;
		}
		return 0;
	}
	/* The debug view and status are in memory; a tensor's bytes are
	 * its file's, warmed with the file. */
	if (n->kind != SFS_NODE_FILE || !n->file)
		return 0;
	if (sfs_grow((void **)&w->items, &w->cap, w->n + 1, sizeof(*w->items)))
		return -ENOMEM;
	char *path = strdup(n->path);
	if (!path)
		return -ENOMEM;
	if (sfs_replica_ref(w->r, n->owner)) {
		free(path);
		return 0; /* replaced meanwhile: not in this generation */
	}
	struct item *it = &w->items[w->n++];
	it->file = n->file;
	it->set = n->set;
	it->obj = (uint32_t)(n->file - ((struct sfs_view *)n->owner)->m->files);
	it->view = n->owner;
	it->path = path;
	for (size_t i = 0; i < n->file->next; i++)
		if (n->file->ext[i].kind == SFS_EXT_REGION)
			w->total += n->file->ext[i].len;
	return 0;
}

/* The inode of @path, walked from the root (the tree lock held), or 0. */
static uint64_t resolve(struct sfs_replica *r, const char *path)
{
	char *copy = strdup(path), *save = NULL;
	uint64_t ino = SFS_ROOT_INO;
	if (!copy)
		return 0;
	for (char *c = strtok_r(copy, "/", &save); c && ino;
	     c = strtok_r(NULL, "/", &save))
		ino = strcmp(c, ".")
			      ? sfs_tree_lookup(sfs_replica_tree(r), ino, c)
			      : ino;
	free(copy);
	return ino;
}

/* Wait while the disk tier is far behind: its writes are what make a
 * prefetch larger than the cache worth anything. */
static void wait_for_disk(struct warm *w)
{
	struct sfs_cache_stats st;
	uint64_t until = sfs_now_ms() + w->timeout_ms;
	for (;;) {
		sfs_cache_stats(sfs_replica_cache(w->r), &st);
		if (st.disk_queue <= w->queue_max || sfs_now_ms() >= until)
			return;
		usleep(1000);
	}
}

/*
 * Wait (bounded) until the cache's slab is faulted in far enough to
 * hold @bytes, or all of it: the slab grows behind the mount
 * (cache/slab.c), and warming past what is ready evicts what was warmed
 * a moment ago (a prefetch right after the mount then ends holding a
 * part of what fits).  Readers never wait for this, only the warm.
 */
static void wait_for_room(struct warm *w, uint64_t bytes)
{
	struct sfs_cache_stats st;
	uint64_t until = sfs_now_ms() + w->timeout_ms;
	/* The cache grows only as it needs: ask it for this much now. */
	bytes += w->base; /* beside what the cache held when it began */
	sfs_cache_want_ready(sfs_replica_cache(w->r), bytes);
	while (!w->room_late) {
		sfs_cache_stats(sfs_replica_cache(w->r), &st);
		if (st.ready >= SFS_MIN(st.size, bytes))
			return;
		if (sfs_now_ms() >= until)
			w->room_late = 1;
		else
			usleep(2000);
	}
}

/* Warm bytes [off, end) of a file; 1 when the budget is spent. */
static int warm_range(struct warm *w, const struct item *it, uint64_t off,
		      uint64_t end, char *err, size_t errlen)
{
	struct sfs_cache *c = sfs_replica_cache(w->r);
	uint64_t ahead = off;

	for (uint64_t pos = off; pos < end;) {
		uint64_t want = SFS_MIN(end, pos + w->window);
		if (ahead < want) {
			wait_for_room(w, w->done + (want - pos) + w->chunk);
			sfs_cache_prefetch(c, it->set, it->obj, ahead,
					   want - ahead, 0);
			ahead = want;
		}
		struct sfs_chunk *ch;
		const uint8_t *p;
		size_t avail;
		int rc = sfs_cache_get(c, it->set, it->obj, pos, &ch, &p,
				       &avail);
		if (rc) {
			snprintf(err, errlen, "%s at byte %" PRIu64 ": %s",
				 it->path, pos,
				 rc == -ESTALE ? "its generation was replaced "
						 "meanwhile; run again"
				 : rc == -EBADMSG
					 ? "bytes do not match the seed's "
					   "checksum"
					 : strerror(-rc));
			return rc;
		}
		sfs_cache_put(c, ch);
		uint64_t n = SFS_MIN((uint64_t)avail, end - pos);
		pos += n;
		w->done += n;
		if (w->cb && w->cb->progress &&
		    w->cb->progress(w->cb->arg, w->done, w->total)) {
			snprintf(err, errlen, "stopped");
			return -ECANCELED;
		}
		if (w->done >= w->budget)
			return 1;
		if (w->queue_max)
			wait_for_disk(w);
	}
	return 0;
}

/* Tell the replica of each view all of whose files this warms, when
 * the cache holds them all. */
static void whole(struct warm *w, int delta)
{
	for (size_t i = 0; i < w->n && w->whole; i++) {
		struct sfs_view *v = w->items[i].view;
		size_t k = 0, seen = 0;
		for (size_t j = 0; j < w->n; j++) {
			seen |= j < i && w->items[j].view == v;
			k += w->items[j].view == v;
		}
		if (!seen && k == v->m->nfiles)
			sfs_replica_warming(w->r, v, delta);
	}
}

/*
 * Queue every region extent of what @w warms, in order, each part once
 * the slab has room for it.  (Waiting for room for all of it first held
 * a re-seeder's first pull back 0.7-2.2 s behind its mount, while eight
 * mounts faulted in their caches on two cores: its share of the seeds'
 * chunks, and the seed's link, waited.)
 */
static void queue_all(struct warm *w)
{
	uint64_t queued = 0, step = QUEUE_STEP_CHUNKS * w->chunk;
	for (size_t i = 0; i < w->n; i++) {
		const struct sfs_mfile *f = w->items[i].file;
		for (size_t j = 0; j < f->next; j++) {
			const struct sfs_extent *e = &f->ext[j];
			if (e->kind != SFS_EXT_REGION)
				continue;
			for (uint64_t o = 0; o < e->len; o += step) {
				uint64_t n = SFS_MIN(step, e->len - o);
				wait_for_room(w, queued + n);
				sfs_cache_prefetch(sfs_replica_cache(w->r),
						   w->items[i].set,
						   w->items[i].obj, e->off + o,
						   n, 0);
				queued += n;
			}
		}
	}
}

int sfs_prefetch(struct sfs_replica *r, const char *const *paths, size_t npaths,
		 const struct sfs_prefetch_cb *cb, char *err, size_t errlen)
{
	struct warm w = {.r = r, .cb = cb};
	struct sfs_cache_stats st;
	int rc = 0, wanting = 0;

	/* Like an open: the seed's current generation. */
	sfs_replica_revalidate(r, SFS_ROOT_INO);
	pthread_rwlock_rdlock(sfs_replica_lock(r));
	for (size_t i = 0; i < npaths && !rc; i++) {
		uint64_t ino = resolve(r, paths[i]);
		if (!ino) {
			snprintf(err, errlen, "%s: not in the mount", paths[i]);
			rc = -ENOENT;
		} else {
			rc = collect(&w, ino);
		}
	}
	pthread_rwlock_unlock(sfs_replica_lock(r));
	if (rc)
		goto out;

	sfs_cache_want_begin(sfs_replica_cache(r));
	wanting = 1;
	sfs_cache_stats(sfs_replica_cache(r), &st);
	w.base = st.used;
	w.chunk = st.chunk_size;
	w.window = SFS_MIN(WINDOW_MAX, st.size / 4);
	w.timeout_ms = 10000;
	w.budget = w.total;
	w.whole = 1;
	if (st.disk_tier) {
		/* The cache stops storing when a quarter of it waits for the
		 * disk: what waits (queue_max) plus what is in flight (the
		 * window and the chunk read now) stays below that. */
		size_t slots = (size_t)(st.size / st.chunk_size);
		w.queue_max = slots / 8;
		w.window = SFS_MAX((uint64_t)st.chunk_size,
				   (uint64_t)(slots / 8 ? slots / 8 - 1 : 0) *
					   st.chunk_size);
	} else if (w.total > st.size / 4 * 3) {
		char line[256], b1[32], b2[32], b3[32];
		w.budget = st.size / 4 * 3;
		snprintf(line, sizeof(line),
			 "the cache holds %s: warming the first %s of %s "
			 "(--cache-dir would keep it all)",
			 sfs_fmt_bytes(st.size, b1, sizeof(b1)),
			 sfs_fmt_bytes(w.budget, b2, sizeof(b2)),
			 sfs_fmt_bytes(w.total, b3, sizeof(b3)));
		if (cb && cb->note)
			cb->note(cb->arg, line);
		w.total = w.budget;
		w.whole = 0;
	}
	if (cb && cb->progress && cb->progress(cb->arg, 0, w.total)) {
		snprintf(err, errlen, "stopped");
		rc = -ECANCELED;
		goto out;
	}
	whole(&w, 1);
	/* A re-seeder waits until its seed lists it, and a moment more for
	 * the others' holdings: replicas started together then agree on
	 * who pulls what from the seeds before they pull. */
	if (w.whole && !sfs_replica_wait_listed(r, LISTED_WAIT_MS)) {
		usleep(LANES_SETTLE_MS * 1000);
		/* All of it queued at once: its share of the seeds' chunks
		 * is pulled without waiting for the others' shares (a
		 * window would wait at the slowest share). */
		w.window = SFS_MAX(w.window, w.total);
		queue_all(&w);
	}
	/* Every region extent, in order: replicas warming together walk
	 * the same way, so the chunks they share arrive together. */
	for (size_t i = 0; i < w.n && !rc; i++) {
		const struct sfs_mfile *f = w.items[i].file;
		for (size_t j = 0; j < f->next && !rc; j++) {
			const struct sfs_extent *e = &f->ext[j];
			if (e->kind == SFS_EXT_REGION)
				rc = warm_range(&w, &w.items[i], e->off,
						e->off + e->len, err, errlen);
		}
	}
	whole(&w, -1);
	rc = rc > 0 ? 0 : rc;
out:
	if (wanting)
		sfs_cache_want_end(sfs_replica_cache(r));
	for (size_t i = 0; i < w.n; i++) {
		sfs_replica_unref(r, w.items[i].view);
		free(w.items[i].path);
	}
	free(w.items);
	return rc;
}
