/* SPDX-License-Identifier: MIT */
/*
 * dq.c - the disk tier's threads: a chunk looked for on disk before
 * the network (verified as any pull), and pulled chunks written behind
 * the readers.  Their queues are core.c's (sfs_cache_load_later,
 * sfs_cache_store_later).
 */
#include "cache/core.h"
#include "cache/disk.h"

#include "common/log.h"
#include "common/util.h"

#include <errno.h>
#include <inttypes.h>
#include <string.h>

/* A disk thread looks for @ch on disk; if it is not there (or not these
 * bytes), it is queued for the network.  Called with c->lock held;
 * drops it. */
static void disk_load(struct sfs_cache *c, struct sfs_chunk *ch)
{
	/* The set stays while @ch names it, and so do its checksums (the
	 * owner's, freed only once the set is). */
	const struct cache_set *s = c->sets[ch->set];
	const struct sfs_cache_obj o = s->objs[ch->obj];
	struct sfs_disk_src *d = s->disk;
	uint64_t off = ch->idx << c->chunk_shift;

	pthread_mutex_unlock(&c->lock);
	int rc = sfs_disk_read(d, ch->obj, off, ch->data, ch->len);
	if (!rc)
		rc = sfs_cache_verify(c, ch, &o, 0, NULL, NULL);
	pthread_mutex_lock(&c->lock);
	if (!rc) {
		ch->state = CH_READY;
		sfs_cache_touch(c, ch);
		c->st.disk_hits++;
		c->st.disk_bytes_read += ch->len;
		sfs_cache_settle(c, ch);
		sfs_cache_wake_chunk(c, ch);
		return;
	}
	if (rc != -ENOENT && rc != -ENODATA && rc != -EBADMSG) {
		c->st.disk_errors++;
		SFS_LOG(SFS_WARN, "cache",
			"disk tier: reading %s object %u bytes [%" PRIu64
			", +%u): %s; pulling them",
			s->label, ch->obj, off, ch->len, strerror(-rc));
	}
	sfs_cache_wake_chunk(c, ch); /* its readers' deadlines start again */
	if (s->retired) {
		ch->state = CH_FAILED;
		ch->err = -ESTALE;
		sfs_cache_settle(c, ch);
		return;
	}
	sfs_peer_enqueue(c, ch, ch->demand);
	sfs_peer_pump(c);
}

static void disk_store(struct sfs_cache *c, struct sfs_chunk *ch)
{
	struct sfs_disk_src *d = c->sets[ch->set]->disk;

	pthread_mutex_unlock(&c->lock);
	int rc = sfs_disk_write(d, ch->obj, ch->idx << c->chunk_shift, ch->data,
				ch->len);
	pthread_mutex_lock(&c->lock);
	c->dq_stores--;
	if (!rc) {
		c->st.disk_stores++;
		c->st.disk_bytes_written += ch->len;
	} else if (rc == -ENOSPC || rc == -ESTALE) {
		c->st.disk_skipped++; /* full (logged once), or retired */
	} else {
		c->st.disk_errors++;
		SFS_LOG(SFS_WARN, "cache",
			"disk tier: writing object %u chunk %" PRIu64 ": %s",
			ch->obj, ch->idx, strerror(-rc));
	}
	ch->refs--;
	sfs_cache_settle(c, ch);
}

/* Every chunk still waiting for a disk thread fails, every store is
 * given up (c->lock held, stopping). */
void sfs_dq_drop(struct sfs_cache *c)
{
	struct sfs_chunk *ch;
	while ((ch = c->dloads.head)) {
		sfs_list_del(&c->dloads, ch);
		ch->state = CH_FAILED;
		ch->err = -ESHUTDOWN;
		sfs_cache_settle(c, ch);
	}
	while ((ch = c->dstores.head)) {
		sfs_list_del(&c->dstores, ch);
		c->dq_stores--;
		c->st.disk_skipped++;
		ch->refs--;
		sfs_cache_settle(c, ch);
	}
}

void *sfs_dq_thread(void *arg)
{
	struct sfs_cache *c = arg;

	pthread_mutex_lock(&c->lock);
	while (!c->stopping) {
		/* Loads first: a reader may be waiting for one. */
		struct sfs_chunk *ch;
		if ((ch = c->dloads.head)) {
			sfs_list_del(&c->dloads, ch);
			disk_load(c, ch);
		} else if ((ch = c->dstores.head)) {
			sfs_list_del(&c->dstores, ch);
			disk_store(c, ch);
		} else {
			/* Idle until there is work. */
			pthread_cond_wait(&c->disk_cond, &c->lock);
		}
	}
	pthread_mutex_unlock(&c->lock);
	return NULL;
}
