/* SPDX-License-Identifier: MIT */
/*
 * tree.h - the mount's inode table, built once from manifests.
 *
 *   ino 1                 the mount point
 *   ino 1/NAME            one directory per published model
 *   NAME/...              the model's directories and files
 *   NAME/.seedfs/         debug view: manifest.json (as fetched),
 *   NAME/.seedfs/tensors/ one file per tensor (its bytes) and one
 *                         T.json beside it (docs/tensors.md)
 *
 * Inode numbers are given in order from 1 and never reused while
 * mounted.  A new generation of a model (sfs_tree_replace_model) keeps
 * the inode of every directory and of every file whose path, size and
 * hash did not change; changed files get new inodes, and the old ones
 * stay resolvable (superseded) for the handles still open on them until
 * their generation goes (sfs_tree_disown): then they are freed, and so
 * are superseded directories at once.  The tree holds the nodes of the
 * generations in use, not of every generation it has seen.  Not thread
 * safe: the fs layer locks.  No FUSE types here.
 */
#ifndef SFS_TREE_H
#define SFS_TREE_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>

#include "metadata/manifest.h"

#define SFS_ROOT_INO 1

enum sfs_node_kind {
	SFS_NODE_DIR,
	SFS_NODE_FILE,	  /* a manifest file: bytes come from extents */
	SFS_NODE_TENSOR,  /* a tensor's bytes: a range of a manifest file */
	SFS_NODE_BLOB,	  /* bytes held in memory (debug view) */
	SFS_NODE_STATUS,  /* rendered when opened: .seedfs/status */
	SFS_NODE_METRICS, /* the same: .seedfs/metrics (Prometheus) */
	SFS_NODE_TJSON,	  /* rendered when opened: a tensor's .json */
};

struct sfs_node {
	uint64_t ino;
	size_t at;	 /* its index in the tree's nodes */
	uint64_t parent; /* its directory (superseded: may be gone) */
	char *name;	 /* owned */
	char *path;	 /* owned: "model/dir/file", for logs */
	enum sfs_node_kind kind;
	int superseded; /* no longer in any directory: open handles only */
	/* FILE, TENSOR, TJSON, BLOB: the caller's generation [borrowed],
	 * or NULL once it went (sfs_tree_disown) */
	void *owner;
	uint64_t size;
	const struct sfs_mfile *file; /* FILE [borrowed from the manifest] */
	/* TENSOR: its bytes are [base, base + size) of @file; TJSON: its
	 * metadata.  [borrowed from the manifest] */
	const struct sfs_mtensor *tensor;
	uint64_t base;
	uint32_t set;	     /* FILE, TENSOR: cache set of its bytes */
	const uint8_t *blob; /* BLOB [borrowed] */
	/* The seed's time and permission bits (files, directories of the
	 * model, and a tensor's those of its file); .has 0: the mount's. */
	struct sfs_mmeta meta;
	uint32_t nsubdirs; /* DIR: listed subdirectories (after finish) */
	size_t nchild, cap_child;
	uint64_t *child; /* DIR: inos, sorted by name after finish */
};

struct sfs_tree {
	size_t n, cap;		 /* nodes alive */
	struct sfs_node **nodes; /* each one alive, in no order [owned] */
	/* By inode number: open addressing, linear probing; @nslots a
	 * power of two, more than twice @n. */
	size_t nslots;
	struct sfs_node **slots;
	uint64_t next_ino; /* the next node's: numbers are never reused */
	char *seed;	   /* HOST:PORT, for tensor metadata; owned */
	/* A required layout (--require layout=...): tensors whose own
	 * layout differs are left out of the tensor view.  Owned, or
	 * NULL. */
	char *layout;
};

/* sfs_tree_new - a tree holding only the root; @seed (HOST:PORT,
 * copied) is what tensor metadata names.  *out [new]. */
int sfs_tree_new(const char *seed, const char *layout, struct sfs_tree **out);

/*
 * sfs_tree_add_model - add m->model and everything the manifest lists,
 * plus NAME/.seedfs/manifest.json showing @json.  @m and @json are
 * borrowed and must outlive the nodes that use them; @set is the cache
 * set of the model's bytes, @owner is stored in its file nodes.
 * Returns 0, -EEXIST (model already present) or -ENOMEM.
 */
int sfs_tree_add_model(struct sfs_tree *t, const struct sfs_manifest *m,
		       uint32_t set, const char *json, size_t json_len,
		       void *owner);

/*
 * sfs_tree_replace_model - make the model of the same name show @m (a
 * newer generation).  Directories and unchanged files (same path, size
 * and published hash) keep their inodes, now pointing into @m; other
 * nodes of the old generation become superseded and their inos are
 * returned in *sup [new, free()], *nsup of them.  Children are sorted
 * again.  Returns 0, -ENOENT (no such model) or -ENOMEM.
 */
int sfs_tree_replace_model(struct sfs_tree *t, const struct sfs_manifest *m,
			   uint32_t set, const char *json, size_t json_len,
			   void *owner, uint64_t **sup, size_t *nsup);

/*
 * sfs_tree_hide_model - take model @name out of the tree (a --require no
 * longer holds): its directory and everything under it become
 * superseded, their inos in *sup [new, free()].  Returns 0 (also when
 * it was not shown) or -ENOMEM.
 */
int sfs_tree_hide_model(struct sfs_tree *t, const char *name, uint64_t **sup,
			size_t *nsup);

/* sfs_tree_add_status - the mount's own MOUNTPOINT/.seedfs/status and
 * .seedfs/metrics.
 * Returns 0 or -ENOMEM. */
int sfs_tree_add_status(struct sfs_tree *t);

/* sfs_tree_finish - sort children for lookup, count subdirectories;
 * after additions. */
void sfs_tree_finish(struct sfs_tree *t);

/*
 * sfs_tree_hidden - 1 if @child of directory @dir is left out of
 * listings: the debug view .seedfs at the mount's root and in each
 * model's directory (reachable by name, like ZFS's .zfs), so cp -r, tar,
 * du and rsync see the model alone.
 */
int sfs_tree_hidden(const struct sfs_tree *t, uint64_t dir,
		    const struct sfs_node *child);

/* sfs_tree_get - node of @ino [borrowed: until the tree changes], or
 * NULL (never made, or freed). */
struct sfs_node *sfs_tree_get(const struct sfs_tree *t, uint64_t ino);

/* sfs_tree_gone_err - for an @ino sfs_tree_get does not find: ESTALE
 * when it was given once (freed with its generation: its handles are
 * stale), else ENOENT. */
static inline int sfs_tree_gone_err(const struct sfs_tree *t, uint64_t ino)
{
	return ino >= 1 && ino < t->next_ino ? ESTALE : ENOENT;
}

/*
 * sfs_tree_owned - the inodes whose bytes come from generation @owner,
 * into *inos [new, free()]; returns how many (0 and NULL when out of
 * memory: the caller then has none to name).
 */
size_t sfs_tree_owned(const struct sfs_tree *t, const void *owner,
		      uint64_t **inos);

/*
 * sfs_tree_disown - generation @owner is gone: its superseded nodes are
 * freed (their numbers are never given again: the kernel's later calls
 * on them find nothing), any other node of it is cut loose (owner, file,
 * tensor and blob NULL: an open of it gets ESTALE).  Returns how many
 * nodes were freed.
 */
size_t sfs_tree_disown(struct sfs_tree *t, const void *owner);

/* sfs_tree_lookup - ino of @name in directory @parent, or 0. */
uint64_t sfs_tree_lookup(const struct sfs_tree *t, uint64_t parent,
			 const char *name);

void sfs_tree_free(struct sfs_tree *t);

#endif /* SFS_TREE_H */
