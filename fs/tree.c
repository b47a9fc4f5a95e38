/* SPDX-License-Identifier: MIT */
#include "tree.h"

#include "common/util.h"

#include <jansson.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Sorting needs the tree; qsort has no context argument. */
static __thread const struct sfs_tree *sort_tree;

static int add_node(struct sfs_tree *t, uint64_t parent, const char *name,
		    enum sfs_node_kind kind, uint64_t *ino)
{
	struct sfs_node *n, *p;

	if (sfs_grow((void **)&t->nodes, &t->cap, t->n + 1,
		     sizeof(t->nodes[0])))
		return -ENOMEM;
	n = &t->nodes[t->n];
	memset(n, 0, sizeof(*n));
	n->parent = parent ? parent : SFS_ROOT_INO;
	n->kind = kind;
	n->name = strdup(name);
	p = parent ? sfs_tree_get(t, parent) : NULL;
	if (p && p->path && *p->path) {
		if (asprintf(&n->path, "%s/%s", p->path, name) < 0)
			n->path = NULL;
	} else {
		n->path = strdup(name);
	}
	if (!n->name || !n->path) {
		free(n->name);
		free(n->path);
		return -ENOMEM;
	}
	t->n++;
	*ino = t->n;
	if (p) {
		if (sfs_grow((void **)&p->child, &p->cap_child, p->nchild + 1,
			     sizeof(p->child[0])))
			return -ENOMEM;
		p->child[p->nchild++] = *ino;
	}
	return 0;
}

int sfs_tree_new(struct sfs_tree **out)
{
	struct sfs_tree *t = calloc(1, sizeof(*t));
	uint64_t ino;
	if (!t)
		return -ENOMEM;
	if (add_node(t, 0, "", SFS_NODE_DIR, &ino)) {
		sfs_tree_free(t);
		return -ENOMEM;
	}
	*out = t;
	return 0;
}

static const char *last_component(const char *path, size_t *dirlen)
{
	const char *s = strrchr(path, '/');
	*dirlen = s ? (size_t)(s - path) : 0;
	return s ? s + 1 : path;
}

/* Ino of the directory holding @path, from the path -> ino map. */
static uint64_t parent_ino(json_t *dirs, const char *path, const char **name)
{
	size_t dl;
	*name = last_component(path, &dl);
	json_t *v = json_object_getn(dirs, path, dl);
	return v ? (uint64_t)json_integer_value(v) : 0;
}

static int add_model(struct sfs_tree *t, const struct sfs_manifest *m,
		     uint32_t src, const char *json, size_t json_len,
		     json_t *dirs)
{
	uint64_t model, dbg, ino, parent;
	const char *name;
	int rc;

	if ((rc = add_node(t, SFS_ROOT_INO, m->model, SFS_NODE_DIR, &model)))
		return rc;
	if (json_object_set_new(dirs, "", json_integer((json_int_t)model)))
		return -ENOMEM;
	/* The manifest was validated: parents come before children and
	 * every path is unique, so each parent is in the map. */
	for (size_t i = 0; i < m->ndirs; i++) {
		if (!(parent = parent_ino(dirs, m->dirs[i], &name)))
			return -EINVAL;
		if ((rc = add_node(t, parent, name, SFS_NODE_DIR, &ino)))
			return rc;
		if (json_object_set_new(dirs, m->dirs[i],
					json_integer((json_int_t)ino)))
			return -ENOMEM;
	}
	for (size_t i = 0; i < m->nfiles; i++) {
		const struct sfs_mfile *f = &m->files[i];
		if (!(parent = parent_ino(dirs, f->path, &name)))
			return -EINVAL;
		if ((rc = add_node(t, parent, name, SFS_NODE_FILE, &ino)))
			return rc;
		struct sfs_node *n = sfs_tree_get(t, ino);
		n->file = f;
		n->size = f->size;
		n->src = src;
	}
	if ((rc = add_node(t, model, SFS_MF_RESERVED, SFS_NODE_DIR, &dbg)))
		return rc;
	if ((rc = add_node(t, dbg, "manifest.json", SFS_NODE_BLOB, &ino)))
		return rc;
	struct sfs_node *n = sfs_tree_get(t, ino);
	n->blob = (const uint8_t *)json;
	n->size = json_len;
	return 0;
}

int sfs_tree_add_model(struct sfs_tree *t, const struct sfs_manifest *m,
		       uint32_t src, const char *json, size_t json_len)
{
	const struct sfs_node *root = sfs_tree_get(t, SFS_ROOT_INO);
	json_t *dirs;
	int rc;

	for (size_t i = 0; i < root->nchild; i++)
		if (strcmp(t->nodes[root->child[i] - 1].name, m->model) == 0)
			return -EEXIST;
	if (!(dirs = json_object()))
		return -ENOMEM;
	rc = add_model(t, m, src, json, json_len, dirs);
	json_decref(dirs);
	return rc;
}

int sfs_tree_add_status(struct sfs_tree *t)
{
	uint64_t dbg, ino;
	int rc = add_node(t, SFS_ROOT_INO, SFS_MF_RESERVED, SFS_NODE_DIR, &dbg);
	if (!rc)
		rc = add_node(t, dbg, "status", SFS_NODE_STATUS, &ino);
	return rc;
}

static int cmp_child(const void *a, const void *b)
{
	const struct sfs_tree *t = sort_tree;
	return strcmp(t->nodes[*(const uint64_t *)a - 1].name,
		      t->nodes[*(const uint64_t *)b - 1].name);
}

void sfs_tree_finish(struct sfs_tree *t)
{
	sort_tree = t;
	for (size_t i = 0; i < t->n; i++)
		if (t->nodes[i].nchild > 1)
			qsort(t->nodes[i].child, t->nodes[i].nchild,
			      sizeof(uint64_t), cmp_child);
	sort_tree = NULL;
}

uint64_t sfs_tree_lookup(const struct sfs_tree *t, uint64_t parent,
			 const char *name)
{
	const struct sfs_node *p = sfs_tree_get(t, parent);
	size_t lo = 0, hi;

	if (!p || p->kind != SFS_NODE_DIR)
		return 0;
	hi = p->nchild;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = strcmp(name, t->nodes[p->child[mid] - 1].name);
		if (c == 0)
			return p->child[mid];
		if (c < 0)
			hi = mid;
		else
			lo = mid + 1;
	}
	return 0;
}

void sfs_tree_free(struct sfs_tree *t)
{
	if (!t)
		return;
	for (size_t i = 0; i < t->n; i++) {
		free(t->nodes[i].name);
		free(t->nodes[i].path);
		free(t->nodes[i].child);
	}
	free(t->nodes);
	free(t);
}
