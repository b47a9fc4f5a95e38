/* SPDX-License-Identifier: MIT */
#include "replica/tree.h"

#include "common/log.h"
#include "common/util.h"
#include "replica/tview.h"
#include "metadata/tname.h"

#include <jansson.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Sorting needs the tree; qsort has no context argument. */
static __thread const struct sfs_tree *sort_tree;

/* Where @ino's search starts in the slots. */
static size_t home(const struct sfs_tree *t, uint64_t ino)
{
	uint64_t h = ino * 0x9e3779b97f4a7c15ull;
	return (size_t)(h ^ (h >> 29)) & (t->nslots - 1);
}

struct sfs_node *sfs_tree_get(const struct sfs_tree *t, uint64_t ino)
{
	if (!ino || !t->nslots)
		return NULL;
	for (size_t i = home(t, ino);; i = (i + 1) & (t->nslots - 1)) {
		struct sfs_node *n = t->slots[i];
		if (!n || n->ino == ino)
			return n;
	}
}

/* Put @n in the slots (there is room). */
static void slot_put(struct sfs_tree *t, struct sfs_node *n)
{
	size_t i = home(t, n->ino);
	while (t->slots[i])
		i = (i + 1) & (t->nslots - 1);
	t->slots[i] = n;
}

/* Room for one more node: the slots at most half full.  0 or -ENOMEM. */
static int slots_room(struct sfs_tree *t)
{
	if (2 * (t->n + 1) < t->nslots)
		return 0;
	size_t old = t->nslots, ns = old ? 2 * old : 64;
	struct sfs_node **was = t->slots;
	struct sfs_node **slots = calloc(ns, sizeof(*slots));
	if (!slots)
		return -ENOMEM;
	t->slots = slots;
	t->nslots = ns;
	for (size_t i = 0; i < old; i++)
		if (was[i])
			slot_put(t, was[i]);
	free(was);
	return 0;
}

/* Take @n out of the slots: the nodes after it in its run move back
 * where a search from their home still finds them. */
static void slot_del(struct sfs_tree *t, const struct sfs_node *n)
{
	size_t mask = t->nslots - 1, i = home(t, n->ino), j;
	while (t->slots[i] != n)
		i = (i + 1) & mask;
	for (j = (i + 1) & mask; t->slots[j]; j = (j + 1) & mask) {
		size_t k = home(t, t->slots[j]->ino);
		/* It stays when its home is in (i, j], cyclically. */
		if (i < j ? (i < k && k <= j) : (i < k || k <= j))
			continue;
		t->slots[i] = t->slots[j];
		i = j;
	}
	t->slots[i] = NULL;
}

/* Free node @n: out of the slots and the list; its number is never
 * given again.  Its directory's list of children must not name it. */
static void node_free(struct sfs_tree *t, struct sfs_node *n)
{
	slot_del(t, n);
	t->nodes[n->at] = t->nodes[--t->n];
	t->nodes[n->at]->at = n->at;
	free(n->name);
	free(n->path);
	free(n->child);
	free(n);
}

static int add_node(struct sfs_tree *t, uint64_t parent, const char *name,
		    enum sfs_node_kind kind, uint64_t *ino)
{
	struct sfs_node *n, *p;

	if (sfs_grow((void **)&t->nodes, &t->cap, t->n + 1,
		     sizeof(t->nodes[0])) ||
	    slots_room(t) || !(n = calloc(1, sizeof(*n))))
		return -ENOMEM;
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
		free(n);
		return -ENOMEM;
	}
	n->ino = t->next_ino++;
	n->at = t->n;
	t->nodes[t->n++] = n;
	slot_put(t, n);
	*ino = n->ino;
	if (p) {
		if (sfs_grow((void **)&p->child, &p->cap_child, p->nchild + 1,
			     sizeof(p->child[0])))
			return -ENOMEM;
		p->child[p->nchild++] = *ino;
	}
	return 0;
}

int sfs_tree_new(const char *seed, const char *layout, struct sfs_tree **out)
{
	struct sfs_tree *t = calloc(1, sizeof(*t));
	uint64_t ino;
	if (!t)
		return -ENOMEM;
	t->next_ino = SFS_ROOT_INO;
	if (!(t->seed = strdup(seed ? seed : "")) ||
	    (layout && !(t->layout = strdup(layout))) ||
	    add_node(t, 0, "", SFS_NODE_DIR, &ino)) {
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

/* Put existing node @ino into directory @parent. */
static int attach(struct sfs_tree *t, uint64_t parent, uint64_t ino)
{
	struct sfs_node *p = sfs_tree_get(t, parent);
	if (sfs_grow((void **)&p->child, &p->cap_child, p->nchild + 1,
		     sizeof(p->child[0])))
		return -ENOMEM;
	p->child[p->nchild++] = ino;
	sfs_tree_get(t, ino)->parent = parent;
	return 0;
}

/* Take @name under @parent from @old (path -> ino of the previous
 * generation) when @reuse says so, else make a new node. */
static int place(struct sfs_tree *t, json_t *old, const char *path,
		 uint64_t parent, const char *name, enum sfs_node_kind kind,
		 int (*reuse)(const struct sfs_node *, const void *),
		 const void *arg, uint64_t *ino)
{
	json_t *v = old ? json_object_get(old, path) : NULL;
	if (v) {
		uint64_t o = (uint64_t)json_integer_value(v);
		const struct sfs_node *n = sfs_tree_get(t, o);
		if (n->kind == kind && reuse(n, arg)) {
			json_object_del(old, path); /* taken */
			*ino = o;
			return attach(t, parent, o);
		}
	}
	return add_node(t, parent, name, kind, ino);
}

static int same_dir(const struct sfs_node *n, const void *arg)
{
	return 1;
}

/* The same bytes and the same attributes: the kernel keeps an inode's
 * page cache and attributes (it may cache them for a day). */
static int same_file(const struct sfs_node *n, const void *arg)
{
	const struct sfs_mfile *f = arg;
	return n->file && n->size == f->size && n->file->has_xxh3 &&
	       f->has_xxh3 && n->file->xxh3 == f->xxh3 &&
	       n->meta.has == f->meta.has &&
	       n->meta.mtime_ns == f->meta.mtime_ns &&
	       n->meta.mode == f->meta.mode;
}

static int never(const struct sfs_node *n, const void *arg)
{
	return 0;
}

/* The same bytes: the page cache of the old inode stays right. */
static int same_tensor(const struct sfs_node *n, const void *arg)
{
	const struct sfs_mtensor *t = arg;
	return n->tensor && n->size == t->len && n->tensor->has_xxh3 &&
	       t->has_xxh3 && n->tensor->xxh3 == t->xxh3;
}

/* NAME/.seedfs/tensors: each tensor's bytes, and T.json beside it.  A
 * name that cannot be a file name even escaped (too long), or a second
 * tensor of the same name, is left out with a warning. */
static int fill_tensors(struct sfs_tree *t, uint64_t dbg,
			const struct sfs_manifest *m, uint32_t set, void *owner,
			json_t *old)
{
	char esc[256], path[300];
	uint64_t dir, ino;
	int rc;

	if ((rc = place(t, old, SFS_MF_RESERVED "/tensors", dbg, "tensors",
			SFS_NODE_DIR, same_dir, NULL, &dir)))
		return rc;
	json_t *seen = json_object();
	if (!seen)
		return -ENOMEM;
	for (size_t i = 0; i < m->ntensors && !rc; i++) {
		const struct sfs_mtensor *mt = &m->tensors[i];
		if (t->layout &&
		    !sfs_layout_is(sfs_tview_layout(m, mt), t->layout))
			continue; /* not the layout this mount requires */
		if (sfs_tname_escape(mt->name, 5, esc, sizeof(esc))) {
			SFS_LOG(SFS_WARN, "fs",
				"%s: tensor %.80s...: name too long for the "
				"tensor view, left out",
				m->model, mt->name);
			continue;
		}
		if (json_object_get(seen, esc)) {
			SFS_LOG(SFS_WARN, "fs",
				"%s: tensor %s appears twice; the tensor view "
				"shows the first",
				m->model, mt->name);
			continue;
		}
		if (json_object_set_new(seen, esc, json_true())) {
			rc = -ENOMEM;
			break;
		}
		snprintf(path, sizeof(path), "%s/tensors/%s", SFS_MF_RESERVED,
			 esc);
		if ((rc = place(t, old, path, dir, esc, SFS_NODE_TENSOR,
				same_tensor, mt, &ino)))
			break;
		struct sfs_node *n = sfs_tree_get(t, ino);
		n->file = &m->files[mt->file];
		n->tensor = mt;
		n->base = mt->off;
		n->size = mt->len;
		n->set = set;
		n->owner = owner;
		n->meta = m->files[mt->file].meta;
		strcat(esc, ".json");
		strcat(path, ".json");
		/* Its text names the generation: a new inode each time. */
		if ((rc = place(t, old, path, dir, esc, SFS_NODE_TJSON, never,
				NULL, &ino)))
			break;
		char *text;
		size_t len;
		if ((rc = sfs_tview_json(m, mt, t->seed, 0, &text, &len)))
			break;
		free(text);
		n = sfs_tree_get(t, ino);
		n->file = &m->files[mt->file];
		n->tensor = mt;
		n->size = len;
		n->set = set;
		n->owner = owner;
		n->meta = m->files[mt->file].meta;
	}
	json_decref(seen);
	return rc;
}

/*
 * Fill directory @model from @m.  @old maps the previous generation's
 * paths ("dir/file") to inos, or is NULL; what is taken from it is
 * removed from it.
 */
static int fill_model(struct sfs_tree *t, uint64_t model,
		      const struct sfs_manifest *m, uint32_t set,
		      const char *json, size_t json_len, void *owner,
		      json_t *old, json_t *dirs)
{
	uint64_t dbg, ino, parent;
	const char *name;
	int rc;

	if (json_object_set_new(dirs, "", json_integer((json_int_t)model)))
		return -ENOMEM;
	sfs_tree_get(t, model)->meta = m->root_meta;
	/* The manifest was validated: parents come before children and
	 * every path is unique, so each parent is in the map. */
	for (size_t i = 0; i < m->ndirs; i++) {
		if (!(parent = parent_ino(dirs, m->dirs[i], &name)))
			return -EINVAL;
		if ((rc = place(t, old, m->dirs[i], parent, name, SFS_NODE_DIR,
				same_dir, NULL, &ino)))
			return rc;
		sfs_tree_get(t, ino)->meta = m->dir_meta[i];
		if (json_object_set_new(dirs, m->dirs[i],
					json_integer((json_int_t)ino)))
			return -ENOMEM;
	}
	for (size_t i = 0; i < m->nfiles; i++) {
		const struct sfs_mfile *f = &m->files[i];
		if (!(parent = parent_ino(dirs, f->path, &name)))
			return -EINVAL;
		if ((rc = place(t, old, f->path, parent, name, SFS_NODE_FILE,
				same_file, f, &ino)))
			return rc;
		struct sfs_node *n = sfs_tree_get(t, ino);
		n->file = f;
		n->size = f->size;
		n->set = set;
		n->owner = owner;
		n->meta = f->meta;
	}
	if ((rc = place(t, old, SFS_MF_RESERVED, model, SFS_MF_RESERVED,
			SFS_NODE_DIR, same_dir, NULL, &dbg)))
		return rc;
	/* The manifest differs in every generation: always a new inode. */
	if ((rc = place(t, old, SFS_MF_RESERVED "/manifest.json", dbg,
			"manifest.json", SFS_NODE_BLOB, never, NULL, &ino)))
		return rc;
	struct sfs_node *n = sfs_tree_get(t, ino);
	n->blob = (const uint8_t *)json;
	n->size = json_len;
	n->owner = owner;
	return fill_tensors(t, dbg, m, set, owner, old);
}

static uint64_t model_ino(const struct sfs_tree *t, const char *model)
{
	const struct sfs_node *root = sfs_tree_get(t, SFS_ROOT_INO);
	for (size_t i = 0; i < root->nchild; i++)
		if (strcmp(sfs_tree_get(t, root->child[i])->name, model) == 0)
			return root->child[i];
	return 0;
}

/* Superseded nodes of no generation (directories, and files whose
 * generation went before they were superseded) go at once: nothing
 * can open them. */
static void free_orphans(struct sfs_tree *t, const uint64_t *inos, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		struct sfs_node *nd = sfs_tree_get(t, inos[i]);
		if (nd && nd->superseded && !nd->owner)
			node_free(t, nd);
	}
}

int sfs_tree_add_model(struct sfs_tree *t, const struct sfs_manifest *m,
		       uint32_t set, const char *json, size_t json_len,
		       void *owner)
{
	uint64_t model;
	json_t *dirs;
	int rc;

	if (model_ino(t, m->model))
		return -EEXIST;
	if ((rc = add_node(t, SFS_ROOT_INO, m->model, SFS_NODE_DIR, &model)))
		return rc;
	if (!(dirs = json_object()))
		return -ENOMEM;
	rc = fill_model(t, model, m, set, json, json_len, owner, NULL, dirs);
	json_decref(dirs);
	return rc;
}

/* Map every node under @dir (paths relative to the model) and empty
 * the directories: fill_model puts back what is still there. */
static int collect(struct sfs_tree *t, uint64_t dir, const char *prefix,
		   json_t *old)
{
	struct sfs_node *d = sfs_tree_get(t, dir);
	uint64_t *child = d->child;
	size_t n = d->nchild;
	int rc = 0;

	d->child = NULL;
	d->nchild = d->cap_child = 0;
	for (size_t i = 0; i < n && !rc; i++) {
		const struct sfs_node *c = sfs_tree_get(t, child[i]);
		char *path;
		if (asprintf(&path, "%s%s%s", prefix, *prefix ? "/" : "",
			     c->name) < 0) {
			rc = -ENOMEM;
			break;
		}
		if (json_object_set_new(old, path,
					json_integer((json_int_t)child[i])))
			rc = -ENOMEM;
		else if (c->kind == SFS_NODE_DIR)
			rc = collect(t, child[i], path, old);
		free(path);
	}
	free(child);
	return rc;
}

int sfs_tree_replace_model(struct sfs_tree *t, const struct sfs_manifest *m,
			   uint32_t set, const char *json, size_t json_len,
			   void *owner, uint64_t **sup, size_t *nsup)
{
	uint64_t model = model_ino(t, m->model);
	json_t *old, *dirs, *v;
	const char *k;
	size_t cap = 0;
	int rc;

	*sup = NULL;
	*nsup = 0;
	if (!model) {
		rc = sfs_tree_add_model(t, m, set, json, json_len, owner);
		sfs_tree_finish(t);
		return rc;
	}
	old = json_object();
	dirs = json_object();
	rc = old && dirs ? collect(t, model, "", old) : -ENOMEM;
	if (!rc)
		rc = fill_model(t, model, m, set, json, json_len, owner, old,
				dirs);
	/* What the new generation did not take is superseded. */
	json_object_foreach (old, k, v) {
		uint64_t ino = (uint64_t)json_integer_value(v);
		sfs_tree_get(t, ino)->superseded = 1;
		if (!rc &&
		    !sfs_grow((void **)sup, &cap, *nsup + 1, sizeof(**sup)))
			(*sup)[(*nsup)++] = ino;
	}
	json_decref(old);
	json_decref(dirs);
	free_orphans(t, *sup, *nsup);
	sfs_tree_finish(t);
	return rc;
}

int sfs_tree_hide_model(struct sfs_tree *t, const char *name, uint64_t **sup,
			size_t *nsup)
{
	uint64_t model = model_ino(t, name);
	struct sfs_node *root = sfs_tree_get(t, SFS_ROOT_INO);
	json_t *old, *v;
	const char *k;
	size_t cap = 0;
	int rc;

	*sup = NULL;
	*nsup = 0;
	if (!model)
		return 0;
	if (!(old = json_object()))
		return -ENOMEM;
	rc = collect(t, model, "", old);
	json_object_set_new(old, "", json_integer((json_int_t)model));
	json_object_foreach (old, k, v) {
		uint64_t ino = (uint64_t)json_integer_value(v);
		sfs_tree_get(t, ino)->superseded = 1;
		if (!sfs_grow((void **)sup, &cap, *nsup + 1, sizeof(**sup)))
			(*sup)[(*nsup)++] = ino;
	}
	json_decref(old);
	for (size_t i = 0; i < root->nchild; i++)
		if (root->child[i] == model) {
			memmove(&root->child[i], &root->child[i + 1],
				(root->nchild - i - 1) * sizeof(uint64_t));
			root->nchild--;
			break;
		}
	free_orphans(t, *sup, *nsup);
	sfs_tree_finish(t);
	return rc;
}

int sfs_tree_add_status(struct sfs_tree *t)
{
	uint64_t dbg, ino;
	int rc = add_node(t, SFS_ROOT_INO, SFS_MF_RESERVED, SFS_NODE_DIR, &dbg);
	if (!rc)
		rc = add_node(t, dbg, "status", SFS_NODE_STATUS, &ino);
	if (!rc)
		rc = add_node(t, dbg, "metrics", SFS_NODE_METRICS, &ino);
	return rc;
}

static int cmp_child(const void *a, const void *b)
{
	const struct sfs_tree *t = sort_tree;
	return strcmp(sfs_tree_get(t, *(const uint64_t *)a)->name,
		      sfs_tree_get(t, *(const uint64_t *)b)->name);
}

void sfs_tree_finish(struct sfs_tree *t)
{
	sort_tree = t;
	for (size_t i = 0; i < t->n; i++) {
		struct sfs_node *d = t->nodes[i];
		if (d->nchild > 1)
			qsort(d->child, d->nchild, sizeof(uint64_t), cmp_child);
		d->nsubdirs = 0;
		for (size_t k = 0; k < d->nchild; k++) {
			const struct sfs_node *c = sfs_tree_get(t, d->child[k]);
			d->nsubdirs += c->kind == SFS_NODE_DIR &&
				       !sfs_tree_hidden(t, d->ino, c);
		}
	}
	sort_tree = NULL;
}

size_t sfs_tree_owned(const struct sfs_tree *t, const void *owner,
		      uint64_t **inos)
{
	size_t n = 0, cap = 0;
	*inos = NULL;
	for (size_t i = 0; i < t->n; i++) {
		if (t->nodes[i]->owner != owner)
			continue;
		if (sfs_grow((void **)inos, &cap, n + 1, sizeof(**inos))) {
			free(*inos);
			*inos = NULL;
			return 0;
		}
		(*inos)[n++] = t->nodes[i]->ino;
	}
	return n;
}

size_t sfs_tree_disown(struct sfs_tree *t, const void *owner)
{
	size_t freed = 0;
	for (size_t i = 0; i < t->n;) {
		struct sfs_node *nd = t->nodes[i];
		if (nd->owner != owner) {
			i++;
			continue;
		}
		if (nd->superseded) {
			node_free(t, nd); /* the last node moved to i */
			freed++;
			continue;
		}
		nd->owner = NULL;
		nd->file = NULL;
		nd->tensor = NULL;
		nd->blob = NULL;
		nd->set = UINT32_MAX; /* no cache set */
		i++;
	}
	return freed;
}

int sfs_tree_hidden(const struct sfs_tree *t, uint64_t dir,
		    const struct sfs_node *child)
{
	const struct sfs_node *d = sfs_tree_get(t, dir);
	return d && (dir == SFS_ROOT_INO || d->parent == SFS_ROOT_INO) &&
	       !strcmp(child->name, SFS_MF_RESERVED);
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
		int c = strcmp(name, sfs_tree_get(t, p->child[mid])->name);
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
		free(t->nodes[i]->name);
		free(t->nodes[i]->path);
		free(t->nodes[i]->child);
		free(t->nodes[i]);
	}
	free(t->nodes);
	free(t->slots);
	free(t->seed);
	free(t->layout);
	free(t);
}
