/* SPDX-License-Identifier: MIT */
/*
 * libseedfs (lib/pub.c, seed/memgen.c) through its public API, with a
 * real tcp transport and control port on loopback: every refusal, the
 * synthesized shard's header and index, an in-place update as the next
 * generation.  Linked into the test (not through the shared library) so
 * the ASan build checks it too.
 */
#include "lib/seedfs.h"

#include "control/control.h"
#include "metadata/manifest.h"
#include "metadata/safetensors.h"

#include "check_run.h"
#include "bound.h"

#include <check.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char err[512];

static struct sfs_manifest *fetch(struct sfs_pub *p)
{
	char hp[64], *json;
	size_t len;
	struct sfs_manifest *m = NULL;
	snprintf(hp, sizeof(hp), "127.0.0.1:%u", sfs_pub_port(p));
	ck_assert_int_eq(sfs_control_get(NULL, hp, "/v1/manifest", 5000,
					 SFS_MANIFEST_MAX, &json, &len, err,
					 sizeof(err)),
			 0);
	ck_assert_msg(!sfs_manifest_decode(json, len, &m, err, sizeof(err)),
		      "%s", err);
	free(json);
	return m;
}

static const struct sfs_mfile *file_named(const struct sfs_manifest *m,
					  const char *path)
{
	for (size_t i = 0; i < m->nfiles; i++)
		if (!strcmp(m->files[i].path, path))
			return &m->files[i];
	return NULL;
}

START_TEST(refusals)
{
	struct sfs_pub *p = NULL;
	struct sfs_pub_cfg bad = {.name = "a/b", .listen = "127.0.0.1:0"};
	ck_assert_int_eq(sfs_pub_new(&bad, &p, err, sizeof(err)), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "not a valid model name"));
	struct sfs_pub_cfg cfg = {.name = "m", .listen = "127.0.0.1:0"};
	ck_assert_int_eq(sfs_pub_new(&cfg, &p, err, sizeof(err)), 0);
	float w[6] = {0};
	uint64_t shape[2] = {2, 3};
	ck_assert_int_eq(sfs_pub_add_tensor(p, "w", "F7", 2, shape, w,
					    sizeof(w), NULL, err, sizeof(err)),
			 -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "not a safetensors dtype"));
	ck_assert_int_eq(sfs_pub_add_tensor(p, "w", "F32", 2, shape, w, 20,
					    NULL, err, sizeof(err)),
			 -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "20 bytes, its shape x F32 says 24"));
	ck_assert_int_eq(sfs_pub_add_tensor(p, "__metadata__", "F32", 2, shape,
					    w, sizeof(w), NULL, err,
					    sizeof(err)),
			 -EINVAL);
	ck_assert_int_eq(sfs_pub_add_tensor(p, "w", "F32", 2, shape, w,
					    sizeof(w), "a b", err, sizeof(err)),
			 -EINVAL);
	ck_assert_int_eq(sfs_pub_add_file(p, "model.safetensors.index.json",
					  "{}", 2, err, sizeof(err)),
			 -EINVAL);
	ck_assert_int_eq(sfs_pub_add_file(p, "../x", "{}", 2, err, sizeof(err)),
			 -EINVAL);
	ck_assert_int_eq(sfs_pub_commit(p, NULL, err, sizeof(err)), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "nothing to publish"));
	ck_assert_uint_eq(sfs_pub_port(p), 0);
	sfs_pub_free(p);
	sfs_pub_free(NULL);
}
END_TEST

START_TEST(publish_and_update)
{
	static float w[2][3] = {{1, 2, 3}, {4, 5, 6}};
	static uint8_t b[5] = {1, 2, 3, 4, 5};
	const uint64_t sw[2] = {2, 3}, sb[1] = {5}, se[1] = {0};
	const char *config = "{\"torch_dtype\": \"float32\"}";
	struct sfs_pub_cfg cfg = {.name = "m",
				  .listen = "127.0.0.1:0",
				  .protocol = "tcp",
				  .identity =
					  "framework=unit,tp_size=2,tp_rank=1"};
	struct sfs_pub *p;
	uint64_t gen = 0;

	ck_assert_int_eq(sfs_pub_new(&cfg, &p, err, sizeof(err)), 0);
	ck_assert_int_eq(sfs_pub_add_file(p, "config.json", config,
					  strlen(config), err, sizeof(err)),
			 0);
	ck_assert_int_eq(sfs_pub_add_tensor(p, "w", "F32", 2, sw, w, sizeof(w),
					    NULL, err, sizeof(err)),
			 0);
	ck_assert_int_eq(sfs_pub_add_tensor(p, "b", "U8", 1, sb, b, sizeof(b),
					    "checkpoint:raw", err, sizeof(err)),
			 0);
	ck_assert_int_eq(sfs_pub_add_tensor(p, "e", "BF16", 1, se, NULL, 0,
					    NULL, err, sizeof(err)),
			 0);
	ck_assert_msg(!sfs_pub_commit(p, &gen, err, sizeof(err)), "%s", err);
	ck_assert_uint_eq(gen, 1);
	ck_assert_uint_gt(sfs_pub_port(p), 0);

	struct sfs_manifest *m = fetch(p);
	ck_assert_str_eq(m->model, "m");
	ck_assert_uint_eq(m->generation, 1);
	ck_assert_str_eq(m->id.dtype, "float32");
	ck_assert_str_eq(m->id.framework, "unit");
	ck_assert_uint_eq(m->id.tp_rank, 1);
	ck_assert_uint_eq(m->nfiles, 3);
	ck_assert_ptr_nonnull(file_named(m, "config.json"));
	ck_assert_ptr_nonnull(file_named(m, "model.safetensors.index.json"));
	const struct sfs_mfile *s =
		file_named(m, "model-00001-of-00001.safetensors");
	ck_assert_ptr_nonnull(s);
	/* The header is inline: parse it with the strict parser. */
	ck_assert_int_eq(s->ext[0].kind, SFS_EXT_INLINE);
	const uint8_t *h = s->ext[0].data;
	uint64_t n = 0;
	for (int i = 0; i < 8; i++)
		n |= (uint64_t)h[i] << (8 * i);
	ck_assert_uint_eq((8 + n) % 8, 0);
	ck_assert_uint_eq(s->ext[0].len, 8 + n);
	ck_assert_uint_eq(s->size, 8 + n + sizeof(w) + sizeof(b));
	struct sfs_st_header *st;
	ck_assert_msg(!sfs_st_parse((const char *)h + 8, n, s->size, &st, err,
				    sizeof(err)),
		      "%s", err);
	ck_assert_uint_eq(st->ntensors, 3);
	sfs_st_free(st);
	ck_assert_ptr_nonnull(memmem(h, s->ext[0].len, "seedfs.identity", 15));
	ck_assert_uint_eq(m->ntensors, 3);
	ck_assert_str_eq(m->tensors[0].name, "w");
	ck_assert_uint_eq(m->tensors[0].off, 8 + n);
	ck_assert_str_eq(m->tensors[1].layout, "checkpoint:raw");
	ck_assert_int_eq(m->tensors[0].has_xxh3, 1);
	uint64_t sum1 = s->xxh3, t0 = m->tensors[0].xxh3;
	sfs_manifest_free(m);

	/* Update in place, commit: generation 2 with new checksums. */
	w[1][2] = 60;
	ck_assert_msg(!sfs_pub_commit(p, &gen, err, sizeof(err)), "%s", err);
	ck_assert_uint_eq(gen, 2);
	m = fetch(p);
	SFS_TEST_BOUND_EQ("served_generation_after_update", 2, m->generation);
	s = file_named(m, "model-00001-of-00001.safetensors");
	SFS_TEST_BOUND_EQ("checksums_changed", 2,
			  (s->xxh3 != sum1) + (m->tensors[0].xxh3 != t0));
	sfs_manifest_free(m);

	/* A processed tensor in a checkpoint model: refused, generation 2
	 * still served. */
	ck_assert_int_eq(sfs_pub_add_tensor(p, "b", "U8", 1, sb, b, sizeof(b),
					    "processed:x", err, sizeof(err)),
			 0);
	ck_assert_int_eq(sfs_pub_commit(p, &gen, err, sizeof(err)), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "layout 'processed:x' in a model "
					  "whose layout is checkpoint"));
	m = fetch(p);
	ck_assert_uint_eq(m->generation, 2);
	sfs_manifest_free(m);
	sfs_pub_free(p);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("pub");
	TCase *t = tcase_create("pub");
	tcase_set_timeout(t, 60);
	tcase_add_test(t, refusals);
	tcase_add_test(t, publish_and_update);
	suite_add_tcase(s, t);
	return sfs_check_run(s);
}
