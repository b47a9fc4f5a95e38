/* SPDX-License-Identifier: MIT */
/*
 * model.h - a model as a replica sees it: its generations ("views"),
 * each one content read from every source that publishes that content.
 *
 * A view is a content: its manifest (as the first source that offered
 * it published it), a cache set of its files, and its holders, the
 * sources serving exactly that content (same identity, same digest for
 * every file), each with its own manifest and its own layout of the
 * bytes.  The newest view is current.  An open file holds a reference
 * to the view it was opened in and reads only through it, so a handle
 * never mixes generations; when no seed serves a superseded view any
 * more (each one's grace period for it ended, or it restarted) reads
 * through it fail with ESTALE, and the page cache of its superseded
 * files is dropped.  Re-seeders holding it do not keep it.
 *
 * The model follows its leader: the first seed given that publishes it
 * and answers.  When the leader publishes another content, that becomes
 * the current view (the tree is rewritten: changed files get new
 * inodes).  Another source with another content is refused for this
 * model, and status says which field differs.
 *
 * All functions are thread safe.
 */
#ifndef SFS_MODEL_H
#define SFS_MODEL_H

#include <stddef.h>
#include <stdint.h>

struct sfs_cache_obj;
struct sfs_manifest;
struct sfs_model;
struct sfs_vholder;

struct sfs_view {
	struct sfs_model *model;
	uint64_t generation; /* as its first source numbered it */
	uint64_t content;    /* the content digest */
	char *json; /* what .seedfs/manifest.json shows (public), owned */
	size_t json_len;
	struct sfs_manifest *m;	    /* owned */
	uint32_t set;		    /* cache set: object i is file i */
	struct sfs_cache_obj *objs; /* what the cache borrows: owned */
	/* Where each file has its tensors (owned; NULL: none known): a
	 * read in a tensor pulls the rest of it ahead. */
	struct sfs_ra_tensors *tensors;
	/* Protected by the model's lock: */
	struct sfs_vholder *holders; /* who serves it */
	int warming;		     /* prefetches of all of it running */
	uint64_t lanes_sig;	     /* of the lanes last given the cache */
	size_t fleet_n, fleet_me;    /* the fleet's lanes last given, or 0 */
	int expired;		     /* no longer served: ESTALE */
	/* A seed (not a re-seeder) served it until then at least
	 * (monotonic ms; 0: none known): what its holders said, kept when
	 * they go (a registry record that lapsed, a seed's restart), so
	 * the grace it announced still holds (model_view_seeded). */
	uint64_t seed_until_ms;
	int refs; /* open handles and other users */
	struct sfs_view *next;
};

#endif /* SFS_MODEL_H */
