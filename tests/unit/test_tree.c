/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of the mount's inode table (replica/tree.c) under churn:
 * generation after generation of one model, each one's superseded nodes
 * freed when it goes, superseded directories at once, unchanged files
 * keeping their inode, and no inode number ever given twice.
 */
#include "bound.h"
#include "check_run.h"

#include "metadata/manifest.h"
#include "replica/tree.h"

#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GENS 200

/* Generation @g: a.txt the same in each, b.txt changed, d<g>/c.txt in a
 * directory of its own, and NFILES files f<i> changed every 7th. */
#define NFILES 50
static struct sfs_manifest *gen(unsigned g)
{
	struct sfs_manifest *m = sfs_manifest_new("m", g);
	char path[64];
	size_t f;
	ck_assert_ptr_nonnull(m);
	snprintf(path, sizeof(path), "d%u", g);
	ck_assert_int_eq(sfs_manifest_add_dir(m, path), 0);
	ck_assert_int_eq(sfs_manifest_add_file(m, "a.txt", &f), 0);
	m->files[f].size = 10;
	m->files[f].has_xxh3 = 1;
	m->files[f].xxh3 = 0xa;
	ck_assert_int_eq(sfs_manifest_add_file(m, "b.txt", &f), 0);
	m->files[f].size = 10;
	m->files[f].has_xxh3 = 1;
	m->files[f].xxh3 = 0xb00 + g;
	snprintf(path, sizeof(path), "d%u/c.txt", g);
	ck_assert_int_eq(sfs_manifest_add_file(m, path, &f), 0);
	m->files[f].size = 1;
	for (unsigned i = 0; i < NFILES; i++) {
		snprintf(path, sizeof(path), "f%u", i);
		ck_assert_int_eq(sfs_manifest_add_file(m, path, &f), 0);
		m->files[f].size = 5;
		m->files[f].has_xxh3 = 1;
		m->files[f].xxh3 = 0xf000 + i + (g / 7) * 1000;
	}
	return m;
}

static uint64_t look(const struct sfs_tree *t, const char *a, const char *b)
{
	uint64_t m = sfs_tree_lookup(t, SFS_ROOT_INO, "m");
	uint64_t i = m ? sfs_tree_lookup(t, m, a) : 0;
	return i && b ? sfs_tree_lookup(t, i, b) : i;
}

START_TEST(generations_freed_numbers_never_reused)
{
	struct sfs_tree *t;
	struct sfs_manifest *ms[GENS + 1] = {0};
	char owners[GENS + 1];
	uint64_t *sup;
	size_t nsup, steady = 0, drift = 0;
	ck_assert_int_eq(sfs_tree_new("127.0.0.1:1", NULL, &t), 0);
	ck_assert_int_eq(sfs_tree_add_status(t), 0);
	ms[1] = gen(1);
	ck_assert_int_eq(sfs_tree_add_model(t, ms[1], 1, "{}", 2, &owners[1]),
			 0);
	sfs_tree_finish(t);
	uint64_t a = look(t, "a.txt", NULL), top = t->next_ino;
	ck_assert_uint_ne(a, 0);
	for (unsigned g = 2; g <= GENS; g++) {
		uint64_t old_b = look(t, "b.txt", NULL);
		char dname[32], want[64];
		snprintf(dname, sizeof(dname), "d%u", g - 1);
		uint64_t old_d = look(t, dname, NULL);
		uint64_t old_c = look(t, dname, "c.txt");
		ck_assert_uint_ne(old_d, 0);
		ms[g] = gen(g);
		ck_assert_int_eq(sfs_tree_replace_model(t, ms[g], g, "{}", 2,
							&owners[g], &sup,
							&nsup),
				 0);
		free(sup);
		/* Unchanged: the same inode, now the new generation's. */
		ck_assert_uint_eq(look(t, "a.txt", NULL), a);
		ck_assert_ptr_eq(sfs_tree_get(t, a)->owner, &owners[g]);
		/* Changed: a new number, above every one given before. */
		uint64_t b = look(t, "b.txt", NULL);
		ck_assert_uint_ge(b, top);
		top = t->next_ino;
		/* The old directory went at once; its file stays for the
		 * handles of its generation, until that goes. */
		ck_assert_ptr_null(sfs_tree_get(t, old_d));
		ck_assert_ptr_nonnull(sfs_tree_get(t, old_c));
		ck_assert(sfs_tree_get(t, old_b)->superseded);
		uint64_t *inos;
		size_t n = sfs_tree_owned(t, &owners[g - 1], &inos);
		ck_assert_uint_ge(n, 2); /* old b.txt, c.txt, manifest.json */
		free(inos);
		ck_assert_uint_ge(sfs_tree_disown(t, &owners[g - 1]), 2);
		ck_assert_ptr_null(sfs_tree_get(t, old_b));
		ck_assert_ptr_null(sfs_tree_get(t, old_c));
		ck_assert_uint_eq(sfs_tree_owned(t, &owners[g - 1], &inos), 0);
		free(inos);
		sfs_manifest_free(ms[g - 1]);
		ms[g - 1] = NULL;
		/* Everything shown is still found, by name and number. */
		ck_assert_uint_ne(look(t, "f0", NULL), 0);
		ck_assert_uint_ne(look(t, "f49", NULL), 0);
		snprintf(dname, sizeof(dname), "d%u", g);
		uint64_t c = look(t, dname, "c.txt");
		ck_assert_uint_ne(c, 0);
		snprintf(want, sizeof(want), "m/%s/c.txt", dname);
		ck_assert_str_eq(sfs_tree_get(t, c)->path, want);
		for (size_t i = 0; i < t->n; i++)
			ck_assert_ptr_eq(sfs_tree_get(t, t->nodes[i]->ino),
					 t->nodes[i]);
		/* As many nodes as one generation shows: the most any
		 * generation is off by, asserted after the last. */
		if (g == 2)
			steady = t->n;
		size_t off = t->n > steady ? t->n - steady : steady - t->n;
		if (off > drift)
			drift = off;
	}
	SFS_TEST_BOUND_EQ("node_count_drift", 0, drift);
	sfs_tree_free(t);
	sfs_manifest_free(ms[GENS]);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("tree");
	TCase *t = tcase_create("churn");
	tcase_add_test(t, generations_freed_numbers_never_reused);
	suite_add_tcase(s, t);
	return sfs_check_run(s);
}
