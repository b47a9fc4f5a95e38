/* SPDX-License-Identifier: MIT */
/*
 * gens.h - the generations of a model as a mount sees them.
 *
 * Each generation the mount adopts is a view: its manifest, the cache
 * source of its regions, and how long the seed still serves it.  The
 * newest is current.  An open file holds a reference to the view it was
 * opened in and reads only through it, so a handle never mixes
 * generations; when the seed stops serving a view (its grace period
 * ended) reads through it fail with ESTALE, and the page cache of its
 * superseded files is dropped.
 *
 * sfs_gens_revalidate, called on open, asks the seed for its current
 * generation (concurrent callers share one question) and adopts a newer
 * one: fetches its manifest, adds a cache source, and updates the tree
 * (changed files get new inodes; see sfs_tree_replace_model).
 *
 * All functions are thread safe.
 */
#ifndef SFS_GENS_H
#define SFS_GENS_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

struct sfs_cache;
struct sfs_manifest;
struct sfs_tree;
struct sfs_xport;

struct sfs_cache_obj;
struct sfs_cache_hobj;
struct sfs_cache_piece;

struct sfs_view {
	uint64_t generation;
	char *json; /* the manifest as fetched, owned */
	size_t json_len;
	struct sfs_manifest *m; /* owned */
	uint32_t set;		/* cache set of its content: object i is
				   file i */
	uint32_t holder;	/* the seed, serving it */
	uint32_t cpeer;		/* the cache peer of that holder */
	/* What the cache borrows for the set and the holder: owned. */
	struct sfs_cache_obj *objs;
	struct sfs_cache_hobj *hobjs;
	struct sfs_cache_piece *pieces;
	/* Fields below are protected by the gens lock. */
	uint64_t expires_ms; /* monotonic; 0: current, or not known */
	int expired;
	int refs; /* open handles */
	struct sfs_view *next;
};

struct sfs_gens_cfg {
	const char *seed; /* HOST:PORT [borrowed] */
	unsigned int timeout_ms;
	struct sfs_xport *x;	     /* [borrowed] */
	uint64_t peer;		     /* the transport's peer of the seed */
	uint32_t cpeer;		     /* and the cache's */
	uint32_t chunk_size;	     /* the cache's */
	size_t ep;		     /* endpoint index in the first manifest */
	struct sfs_cache *cache;     /* [borrowed] */
	struct sfs_tree *tree;	     /* [borrowed] */
	pthread_rwlock_t *tree_lock; /* [borrowed] guards @tree */
	/* --require: a generation whose identity does not match is not
	 * shown (hidden); NULL: every generation is shown. [borrowed] */
	const struct sfs_require *require;
	/* Drop the kernel's cached pages of @ino (FUSE notify). */
	void (*inval_inode)(void *arg, uint64_t ino);
	void *inval_arg;
};

struct sfs_gens;

/*
 * sfs_gens_new - start with the seed's first generation: @json and @m
 * [owned from now on, also on failure].  Its content becomes a cache
 * set, the seed its holder.  *first [borrowed] is its view, for the
 * tree's owner pointers.  Starts the sweeper thread.  Returns 0 or
 * -errno.
 */
int sfs_gens_new(const struct sfs_gens_cfg *cfg, char *json, size_t json_len,
		 struct sfs_manifest *m, struct sfs_gens **out,
		 struct sfs_view **first);

/*
 * sfs_gens_chunk_size - the chunk size a cache needs for @m: @want, or
 * the largest checksum chunk of its files if that is larger (chunks are
 * verified whole).
 */
uint32_t sfs_gens_chunk_size(const struct sfs_manifest *m, uint32_t want);

/* sfs_gens_set_inval - where to send page cache invalidations (the FUSE
 * session exists only after the tree is built). */
void sfs_gens_set_inval(struct sfs_gens *g, void (*fn)(void *, uint64_t),
			void *arg);

/* sfs_gens_free - stop the sweeper, free every view.  NULL is fine. */
void sfs_gens_free(struct sfs_gens *g);

/*
 * sfs_gens_revalidate - adopt the seed's current generation if it is
 * newer.  A seed that cannot be asked is logged (once per outage) and
 * the current view stays; it is asked again only a timeout later, so
 * opens during an outage do not each wait for it.  Returns 0 or -errno (adoption failed: logged,
 * the current view stays).
 */
int sfs_gens_revalidate(struct sfs_gens *g);

/*
 * sfs_gens_revalidate_missing - for a lookup of a name that is not
 * there: the same as sfs_gens_revalidate, but at most every 200 ms (a
 * check that recent answers), and waiting at most a second for the
 * seed, so a program polling for a file sees it soon after the seed
 * publishes it, without a request per poll.
 */
int sfs_gens_revalidate_missing(struct sfs_gens *g);

/*
 * sfs_gens_current - the current generation, if it is of model @name
 * and shown: *v referenced (sfs_gens_unref it), *m its manifest.  0 or
 * -ENOENT.
 */
int sfs_gens_current(struct sfs_gens *g, const char *name, struct sfs_view **v,
		     const struct sfs_manifest **m);

/* sfs_gens_current_peer - the cache peer the current generation is read
 * through. */
uint32_t sfs_gens_current_peer(struct sfs_gens *g);

/*
 * sfs_gens_control - 1 when the seed's control port did not answer the
 * last question (then *silent_ms: for how long, @err: why), else 0.
 */
int sfs_gens_control(struct sfs_gens *g, uint64_t *silent_ms, char *err,
		     size_t len);

/*
 * sfs_gens_reconnect - the cache's reconnect callback (@g as its arg):
 * reset the transport and connect again to the seed's current run.
 * 0 or -errno (logged).  Serialized with connecting to a new run.
 */
int sfs_gens_reconnect(struct sfs_gens *g, uint32_t cpeer, uint64_t old_peer,
		       uint64_t *new_peer);

/* sfs_gens_generation - the current view's generation. */
uint64_t sfs_gens_generation(struct sfs_gens *g);

/* sfs_gens_summary - one line on the current generation, for status:
 * "NAME generation N files F bytes B tensors T"; and how many
 * superseded generations are still served. */
void sfs_gens_summary(struct sfs_gens *g, char *buf, size_t len, size_t *older);

/* sfs_gens_identity - the current generation's identity on one line,
 * "K=V K=V ..." in docs/identity.md's order, for status.  Thread safe. */
void sfs_gens_identity(struct sfs_gens *g, char *buf, size_t len);

/* sfs_gens_stop - stop the sweeper (no more invalidations); before the
 * FUSE session goes.  Idempotent. */
void sfs_gens_stop(struct sfs_gens *g);

/*
 * sfs_gens_hidden - 1 if the current generation does not meet
 * cfg.require (then @why, if not NULL, says which field differs), else
 * 0.  Thread safe.
 */
int sfs_gens_hidden(struct sfs_gens *g, char *why, size_t len);

/*
 * References held by open handles and by callers that use a view's
 * manifest outside the tree lock.  sfs_gens_ref - take one on @v, a view
 * read from a tree node while the caller holds the tree lock (the
 * sweeper frees a view only after it has cut the tree's pointers to it
 * under that lock).  Returns 0, or -ESTALE when @v is NULL or no longer
 * served: then no reference is taken.  sfs_gens_unref - drop one.
 * sfs_gens_alive - 0 once the seed no longer serves @v.
 */
int sfs_gens_ref(struct sfs_gens *g, struct sfs_view *v);
void sfs_gens_unref(struct sfs_gens *g, struct sfs_view *v);
int sfs_gens_alive(struct sfs_gens *g, struct sfs_view *v);

#endif /* SFS_GENS_H */
