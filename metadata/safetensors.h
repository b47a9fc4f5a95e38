/* SPDX-License-Identifier: MIT */
/*
 * safetensors.h - strict validation of safetensors headers.
 *
 * A safetensors file is: u64 little-endian N, N bytes of JSON, data.
 * The JSON maps tensor names to {dtype, shape, data_offsets} (offsets
 * relative to the data section) plus an optional "__metadata__" map of
 * strings.  Headers come from disk or the network: every rule below is
 * checked and a violation is reported in one line naming the tensor and
 * the rule.  Thread safe; no global state.
 */
#ifndef SFS_SAFETENSORS_H
#define SFS_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#define SFS_ST_HEADER_MAX (100u * 1000 * 1000) /* format's own limit */
#define SFS_ST_MAX_DIMS 16
#define SFS_ST_MAX_TENSORS 1000000
#define SFS_ST_NAME_MAX 4096
#define SFS_DTYPE_MAX 16

struct sfs_st_tensor {
	char *name; /* owned by the header */
	char dtype[SFS_DTYPE_MAX];
	uint32_t ndim;
	uint64_t shape[SFS_ST_MAX_DIMS];
	uint64_t begin, end; /* byte range in the data section */
};

struct sfs_st_header {
	uint64_t json_len; /* N */
	uint64_t data_off; /* 8 + N: where the data section starts */
	size_t ntensors;   /* sorted by begin */
	struct sfs_st_tensor *tensors;
};

/*
 * sfs_dtype_size - bytes per element of a safetensors dtype name, or 0
 * when the name is unknown.
 */
unsigned int sfs_dtype_size(const char *dtype);

/*
 * sfs_st_tensor_bytes - product of @shape times @elem into *out.
 * Returns 0 or -EOVERFLOW.
 */
int sfs_st_tensor_bytes(const uint64_t *shape, uint32_t ndim, unsigned int elem,
			uint64_t *out);

/*
 * sfs_st_header_len - read N from the first 8 bytes of a file of
 * @file_size bytes and check it against the cap and the file size.
 * Returns 0 and *json_len, or -EINVAL with one line in @err.
 */
int sfs_st_header_len(const uint8_t *first8, uint64_t file_size,
		      uint64_t *json_len, char *err, size_t errlen);

/*
 * sfs_st_parse - validate the @json_len bytes of header JSON of a file
 * of @file_size bytes.  On success *out [new] is freed with
 * sfs_st_free.  Returns 0, -EINVAL (one line in @err) or -ENOMEM.
 */
int sfs_st_parse(const char *json, uint64_t json_len, uint64_t file_size,
		 struct sfs_st_header **out, char *err, size_t errlen);

void sfs_st_free(struct sfs_st_header *h);

#endif /* SFS_SAFETENSORS_H */
