/* SPDX-License-Identifier: MIT */
/*
 * gguf.h - strict validation of GGUF (version 3) headers.
 *
 * A GGUF file is: "GGUF", u32 version, u64 tensor count, u64 metadata
 * count, the metadata (key, type, value), the tensor infos (name, dims,
 * ggml type, offset), padding to the alignment (general.alignment,
 * default 32), then the data.  All little-endian.  The header comes from
 * disk or the network: every length and count is checked against the
 * bytes there are and against caps, and a violation is reported in one
 * line naming the field.  Thread safe; no global state.
 */
#ifndef SFS_GGUF_H
#define SFS_GGUF_H

#include <stddef.h>
#include <stdint.h>

#include "metadata/safetensors.h" /* SFS_DTYPE_MAX */

#define SFS_GGUF_VERSION 3
#define SFS_GGUF_MAX_DIMS 4  /* ggml's */
#define SFS_GGUF_NAME_MAX 63 /* ggml's, without the NUL */
#define SFS_GGUF_MAX_TENSORS 1000000
#define SFS_GGUF_MAX_KV 1000000
#define SFS_GGUF_STR_MAX (16u << 20)	 /* one string */
#define SFS_GGUF_HEADER_MAX (256u << 20) /* everything before the data */
#define SFS_GGUF_ARRAY_DEPTH 4

struct sfs_gguf_tensor {
	char name[SFS_GGUF_NAME_MAX + 1];
	char dtype[SFS_DTYPE_MAX]; /* ggml type name: F32, Q4_K, ... */
	uint32_t ndim;
	uint64_t shape[SFS_GGUF_MAX_DIMS]; /* row-major: ggml's ne reversed */
	uint64_t off, len;		   /* absolute byte range in the file */
};

struct sfs_gguf {
	uint32_t version;
	uint64_t nkv;
	uint32_t alignment;
	uint64_t data_off; /* where the data section starts */
	size_t ntensors;   /* in file order */
	struct sfs_gguf_tensor *tensors;
};

/*
 * sfs_gguf_parse - validate the GGUF file @buf of @size bytes (the whole
 * file: tensor ranges are checked against it).  *out [new] is freed with
 * sfs_gguf_free.  Returns 0, -EINVAL with one line in @err, -ENOMEM.
 */
int sfs_gguf_parse(const uint8_t *buf, uint64_t size, struct sfs_gguf **out,
		   char *err, size_t errlen);

/*
 * sfs_gguf_parse_head - as sfs_gguf_parse, for a file of @size bytes of
 * which the @head_len first are at @buf (a copy: a caller that must not
 * read the file's mapping while parsing).  -EAGAIN (@err set) when the
 * header runs past them: copy more, and parse again.  With @head_len at
 * least the smaller of @size and SFS_GGUF_HEADER_MAX, never -EAGAIN.
 */
int sfs_gguf_parse_head(const uint8_t *buf, uint64_t head_len, uint64_t size,
			struct sfs_gguf **out, char *err, size_t errlen);

void sfs_gguf_free(struct sfs_gguf *g);

/*
 * sfs_ggml_dtype - for a ggml type name (as sfs_gguf_tensor.dtype),
 * elements per block and bytes per block.  Returns 0, or -ENOENT for a
 * name that is not a ggml type this build knows.
 */
int sfs_ggml_dtype(const char *name, uint32_t *block, uint32_t *bytes);

/*
 * sfs_ggml_tensor_bytes - bytes of a tensor of @dtype and row-major
 * @shape.  Returns 0, -ENOENT (unknown type), -EINVAL (the last
 * dimension is not a whole number of blocks) or -EOVERFLOW.
 */
int sfs_ggml_tensor_bytes(const char *dtype, const uint64_t *shape,
			  uint32_t ndim, uint64_t *out);

#endif /* SFS_GGUF_H */
