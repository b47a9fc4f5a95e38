/* SPDX-License-Identifier: MIT */
/* blob.c - bytes shared by reference (blob.h). */
#include "common/blob.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>

struct sfs_blob {
	atomic_size_t refs;
	char *data;
	size_t len;
};

int sfs_blob_wrap(char *data, size_t len, struct sfs_blob **out)
{
	struct sfs_blob *b = malloc(sizeof(*b));
	*out = NULL;
	if (!b)
		return -ENOMEM;
	atomic_init(&b->refs, 1);
	b->data = data;
	b->len = len;
	*out = b;
	return 0;
}

const char *sfs_blob_data(const struct sfs_blob *b)
{
	return b->data;
}

size_t sfs_blob_len(const struct sfs_blob *b)
{
	return b->len;
}

struct sfs_blob *sfs_blob_get(struct sfs_blob *b)
{
	atomic_fetch_add_explicit(&b->refs, 1, memory_order_relaxed);
	return b;
}

void sfs_blob_put(void *arg)
{
	struct sfs_blob *b = arg;
	if (!b ||
	    atomic_fetch_sub_explicit(&b->refs, 1, memory_order_acq_rel) != 1)
		return;
	free(b->data);
	free(b);
}
