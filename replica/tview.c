/* SPDX-License-Identifier: MIT */
#include "replica/tview.h"

#include "metadata/manifest.h"

#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *sfs_tview_layout(const struct sfs_manifest *m,
			     const struct sfs_mtensor *t)
{
	return t && t->layout[0] ? t->layout : m->id.layout;
}

static char *shape_text(const struct sfs_mtensor *t)
{
	size_t cap = 2 + (size_t)t->ndim * 22, o = 0;
	char *s = malloc(cap);
	if (!s)
		return NULL;
	s[o++] = '[';
	for (uint32_t i = 0; i < t->ndim; i++)
		o += (size_t)snprintf(s + o, cap - o, "%s%" PRIu64,
				      i ? ", " : "", t->shape[i]);
	snprintf(s + o, cap - o, "]");
	return s;
}

static char *hex64(uint64_t v)
{
	char *s = malloc(19);
	if (s)
		snprintf(s, 19, "0x%016" PRIx64, v);
	return s;
}

int sfs_tview_json(const struct sfs_manifest *m, const struct sfs_mtensor *t,
		   const char *seed, uint64_t cached, char **out, size_t *len)
{
	json_t *shape = json_array();
	char sum[19] = "";
	for (uint32_t i = 0; shape && i < t->ndim; i++)
		json_array_append_new(shape,
				      json_integer((json_int_t)t->shape[i]));
	if (t->has_xxh3)
		snprintf(sum, sizeof(sum), "0x%016" PRIx64, t->xxh3);
	json_t *o = json_pack(
		"{s:s,s:s,s:o*,s:s,s:[I,I],s:I,s:s,s:{s:s,s:s*},s:s,s:I}",
		"name", t->name, "dtype", t->dtype, "shape", shape, "file",
		m->files[t->file].path, "byte_range", (json_int_t)t->off,
		(json_int_t)(t->off + t->len), "length", (json_int_t)t->len,
		"layout", sfs_tview_layout(m, t), "checksum", "algorithm",
		"xxh3-64", "value", t->has_xxh3 ? sum : NULL, "seed",
		seed ? seed : "", "generation", (json_int_t)m->generation);
	if (!o)
		return -ENOMEM;
	/* One member per line, each value compact; the cached count last,
	 * in a fixed width (JSON allows the blanks): the size of the text
	 * depends on nothing that changes while mounted. */
	char *text = NULL;
	size_t n = 0;
	FILE *f = open_memstream(&text, &n);
	const char *k;
	json_t *v;
	int rc = f ? 0 : -ENOMEM;
	if (f)
		fputs("{\n", f);
	json_object_foreach (o, k, v) {
		json_t *key = json_string(k);
		char *kt = key ? json_dumps(key, JSON_ENCODE_ANY) : NULL;
		char *vt = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
		json_decref(key);
		if (!kt || !vt || !f)
			rc = -ENOMEM;
		else
			fprintf(f, "  %s: %s,\n", kt, vt);
		free(kt);
		free(vt);
	}
	if (f) {
		fprintf(f, "  \"cached_bytes\": %20" PRIu64 "\n}\n", cached);
		if (fclose(f))
			rc = -ENOMEM;
	}
	json_decref(o);
	if (rc) {
		free(text);
		return rc;
	}
	*out = text;
	*len = n;
	return 0;
}

static const char *const tensor_attrs[] = {
	"user.seedfs.dtype",  "user.seedfs.shape",
	"user.seedfs.layout", "user.seedfs.generation",
	"user.seedfs.seed",   "user.seedfs.xxh3",
	"user.seedfs.file",   NULL,
};
static const char *const file_attrs[] = {
	"user.seedfs.generation", "user.seedfs.seed",	 "user.seedfs.layout",
	"user.seedfs.xxh3",	  "user.seedfs.tensors", NULL,
};

static int listed(const char *const *names, const char *name)
{
	for (size_t i = 0; names[i]; i++)
		if (!strcmp(names[i], name))
			return 1;
	return 0;
}

int sfs_tview_xattr(const struct sfs_manifest *m, const struct sfs_mtensor *t,
		    const struct sfs_mfile *f, const char *seed,
		    const char *name, char **out, size_t *len)
{
	char *v = NULL;

	if (!listed(t ? tensor_attrs : file_attrs, name))
		return -ENODATA;
	const char *k = name + strlen("user.seedfs.");
	if (!strcmp(k, "dtype")) {
		v = strdup(t->dtype);
	} else if (!strcmp(k, "shape")) {
		v = shape_text(t);
	} else if (!strcmp(k, "layout")) {
		v = strdup(sfs_tview_layout(m, t));
	} else if (!strcmp(k, "generation")) {
		if (asprintf(&v, "%" PRIu64, m->generation) < 0)
			v = NULL;
	} else if (!strcmp(k, "seed")) {
		v = strdup(seed ? seed : "");
	} else if (!strcmp(k, "file")) {
		v = strdup(m->files[t->file].path);
	} else if (!strcmp(k, "xxh3")) {
		int has = t ? t->has_xxh3 : f->has_xxh3;
		if (!has)
			return -ENODATA;
		v = hex64(t ? t->xxh3 : f->xxh3);
	} else if (!strcmp(k, "tensors")) {
		/* How many tensors the file holds (safetensors, GGUF). */
		size_t n = 0, fi = (size_t)(f - m->files);
		for (size_t i = 0; i < m->ntensors; i++)
			n += m->tensors[i].file == fi;
		if (!n)
			return -ENODATA;
		if (asprintf(&v, "%zu", n) < 0)
			v = NULL;
	}
	if (!v)
		return -ENOMEM;
	*out = v;
	*len = strlen(v);
	return 0;
}

int sfs_tview_xattr_list(const struct sfs_manifest *m,
			 const struct sfs_mtensor *t, const struct sfs_mfile *f,
			 const char *seed, char **out, size_t *len)
{
	const char *const *names = t ? tensor_attrs : file_attrs;
	size_t n = 0;
	for (size_t i = 0; names[i]; i++)
		n += strlen(names[i]) + 1;
	char *s = malloc(n), *p = s;
	if (!s)
		return -ENOMEM;
	for (size_t i = 0; names[i]; i++) {
		/* Only what getxattr answers. */
		char *v;
		size_t vl;
		int rc = sfs_tview_xattr(m, t, f, seed, names[i], &v, &vl);
		if (rc == -ENODATA)
			continue;
		if (rc) {
			free(s);
			return rc;
		}
		free(v);
		size_t l = strlen(names[i]) + 1;
		memcpy(p, names[i], l);
		p += l;
	}
	*out = s;
	*len = (size_t)(p - s);
	return 0;
}
