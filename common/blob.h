/* SPDX-License-Identifier: MIT */
/*
 * blob.h - bytes shared by reference: one buffer that many readers hold
 * at once (every answer of a seed's manifest sent at a time), freed
 * when the last lets go.
 */
#ifndef SFS_BLOB_H
#define SFS_BLOB_H

#include <stddef.h>

struct sfs_blob;

/*
 * sfs_blob_wrap - a blob of the @len bytes at @data [owned: free()d with
 * the last reference], one reference held; *out [new, sfs_blob_put].  0,
 * or -ENOMEM (then @data is still the caller's).
 */
int sfs_blob_wrap(char *data, size_t len, struct sfs_blob **out);

/* sfs_blob_data, sfs_blob_len - its bytes [borrowed while a reference
 * is held] and how many. */
const char *sfs_blob_data(const struct sfs_blob *b);
size_t sfs_blob_len(const struct sfs_blob *b);

/* sfs_blob_get - one more reference; returns @b.  Thread safe. */
struct sfs_blob *sfs_blob_get(struct sfs_blob *b);

/* sfs_blob_put - one reference less: the last frees it.  NULL is fine.
 * Takes void * so a callback (libmicrohttpd's) can be it.  Thread
 * safe. */
void sfs_blob_put(void *b);

#endif
