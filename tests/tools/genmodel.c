/* SPDX-License-Identifier: MIT */
/*
 * genmodel - write a deterministic test model directory:
 *
 *   config.json, tokenizer.json (larger than the inline limit),
 *   model-0000K-of-0000N.safetensors (odd shapes, mixed dtypes, one
 *   zero-byte tensor), model.safetensors.index.json, empty.txt,
 *   extra/notes.txt, extra/empty.bin, extra/deep/readme.md
 *
 * usage: genmodel DIR [--size BYTES] [--shards N] [--seed N]
 */
#include "common/util.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

static uint64_t rng;

static uint64_t next(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

static void fill(uint8_t *p, size_t n)
{
	size_t i = 0;
	for (; i + 8 <= n; i += 8) {
		uint64_t v = next();
		memcpy(p + i, &v, 8);
	}
	for (; i < n; i++)
		p[i] = (uint8_t)next();
}

static void die(const char *what, const char *path)
{
	fprintf(stderr, "genmodel: %s %s: %s\n", what, path, strerror(errno));
	exit(1);
}

static void write_file(const char *dir, const char *name, const void *p,
		       size_t n)
{
	char path[4096];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	FILE *f = fopen(path, "wb");
	if (!f || (n && fwrite(p, 1, n, f) != n) || fclose(f))
		die("cannot write", path);
}

struct tensor {
	char name[96];
	const char *dtype;
	unsigned esz;
	uint64_t shape[2];
	unsigned ndim;
	uint64_t bytes;
};

static const struct {
	const char *name;
	unsigned esz;
} dtypes[] = {{"F32", 4}, {"BF16", 2}, {"F16", 2},
	      {"I8", 1},  {"U8", 1},   {"F64", 8}};

/* Write one shard of about @target bytes; append its names to @index. */
static void write_shard(const char *dir, int k, int nshards, uint64_t target,
			int *layer, FILE *index, int *first_entry)
{
	struct tensor *t = NULL;
	size_t n = 0, cap = 0;
	uint64_t total = 0;
	char name[64];

	snprintf(name, sizeof(name), "model-%05d-of-%05d.safetensors", k + 1,
		 nshards);
	while (total < target || n < 2) {
		if (sfs_grow((void **)&t, &cap, n + 1, sizeof(*t)))
			exit(1);
		struct tensor *x = &t[n];
		unsigned d = (unsigned)(next() % 6);
		x->dtype = dtypes[d].name;
		x->esz = dtypes[d].esz;
		if (k == 0 && n == 1) { /* a zero-byte tensor */
			x->ndim = 2;
			x->shape[0] = 0;
			x->shape[1] = 17;
			snprintf(x->name, sizeof(x->name),
				 "model.empty_buffer");
		} else if (n % 5 == 4) {
			x->ndim = 1;
			x->shape[0] = 1 + next() % 4093;
			snprintf(x->name, sizeof(x->name),
				 "model.layers.%d.input_layernorm.weight",
				 *layer);
		} else {
			x->ndim = 2;
			x->shape[0] = 1 + next() % 511;
			x->shape[1] = 1 + next() % 2039;
			snprintf(x->name, sizeof(x->name),
				 "model.layers.%d.mlp.proj_%zu.weight", *layer,
				 n);
			if (n % 3 == 2)
				(*layer)++;
		}
		x->bytes = x->esz;
		for (unsigned i = 0; i < x->ndim; i++)
			x->bytes *= x->shape[i];
		total += x->bytes;
		n++;
	}
	/* Header JSON, padded with spaces to a multiple of 8. */
	size_t hcap = 256 + n * 200, h = 0;
	char *hdr = malloc(hcap);
	h += (size_t)snprintf(hdr + h, hcap - h,
			      "{\"__metadata__\":{\"format\":\"pt\"}");
	uint64_t off = 0;
	for (size_t i = 0; i < n; i++) {
		struct tensor *x = &t[i];
		h += (size_t)snprintf(hdr + h, hcap - h,
				      ",\"%s\":{\"dtype\":\"%s\",\"shape\":[",
				      x->name, x->dtype);
		for (unsigned j = 0; j < x->ndim; j++)
			h += (size_t)snprintf(hdr + h, hcap - h, "%s%" PRIu64,
					      j ? "," : "", x->shape[j]);
		h += (size_t)snprintf(hdr + h, hcap - h,
				      "],\"data_offsets\":[%" PRIu64 ",%" PRIu64
				      "]}",
				      off, off + x->bytes);
		off += x->bytes;
		fprintf(index, "%s\n    \"%s\": \"%s\"",
			*first_entry ? "" : ",", x->name, name);
		*first_entry = 0;
	}
	hdr[h++] = '}';
	while (h % 8)
		hdr[h++] = ' ';

	char path[4096];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	FILE *f = fopen(path, "wb");
	if (!f)
		die("cannot write", path);
	uint8_t len8[8];
	for (int i = 0; i < 8; i++)
		len8[i] = (uint8_t)((uint64_t)h >> (8 * i));
	fwrite(len8, 1, 8, f);
	fwrite(hdr, 1, h, f);
	size_t bufsz = 1 << 20;
	uint8_t *buf = malloc(bufsz);
	for (uint64_t left = off; left;) {
		size_t c = (size_t)SFS_MIN(left, (uint64_t)bufsz);
		fill(buf, c);
		if (fwrite(buf, 1, c, f) != c)
			die("cannot write", path);
		left -= c;
	}
	if (fclose(f))
		die("cannot write", path);
	free(buf);
	free(hdr);
	free(t);
}

int main(int argc, char **argv)
{
	uint64_t size = 32u << 20, shards = 3, seed = 42;
	const char *dir = NULL;

	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--size") && i + 1 < argc)
			sfs_parse_size(argv[++i], &size);
		else if (!strcmp(argv[i], "--shards") && i + 1 < argc)
			sfs_parse_u64(argv[++i], &shards);
		else if (!strcmp(argv[i], "--seed") && i + 1 < argc)
			sfs_parse_u64(argv[++i], &seed);
		else if (!dir && argv[i][0] != '-')
			dir = argv[i];
		else {
			fprintf(stderr, "usage: genmodel DIR [--size BYTES] "
					"[--shards N] [--seed N]\n");
			return 2;
		}
	}
	if (!dir || shards == 0 || shards > 99999) {
		fprintf(stderr, "usage: genmodel DIR [--size BYTES] "
				"[--shards N] [--seed N]\n");
		return 2;
	}
	rng = seed * 0x9e3779b97f4a7c15ull + 1;
	char sub[4096];
	mkdir(dir, 0755);
	snprintf(sub, sizeof(sub), "%s/extra", dir);
	mkdir(sub, 0755);
	snprintf(sub, sizeof(sub), "%s/extra/deep", dir);
	mkdir(sub, 0755);

	const char *config =
		"{\n  \"architectures\": [\"LlamaForCausalLM\"],\n"
		"  \"hidden_size\": 4096,\n  \"num_hidden_layers\": 4,\n"
		"  \"torch_dtype\": \"bfloat16\"\n}\n";
	write_file(dir, "config.json", config, strlen(config));
	write_file(dir, "empty.txt", "", 0);
	write_file(dir, "extra/empty.bin", "", 0);
	const char *notes = "generated by seedfs genmodel\n";
	write_file(dir, "extra/notes.txt", notes, strlen(notes));
	write_file(dir, "extra/deep/readme.md", "# deep\n", 7);
	/* A tokenizer bigger than the inline limit, odd-sized. */
	size_t tsz = 200003;
	char *tok = malloc(tsz);
	for (size_t i = 0; i < tsz; i++)
		tok[i] = (char)('a' + next() % 26);
	write_file(dir, "tokenizer.json", tok, tsz);
	free(tok);

	char path[4096];
	snprintf(path, sizeof(path), "%s/model.safetensors.index.json", dir);
	FILE *index = fopen(path, "w");
	if (!index)
		die("cannot write", path);
	fprintf(index, "{\n  \"metadata\": {},\n  \"weight_map\": {");
	int layer = 0, first = 1;
	for (uint64_t k = 0; k < shards; k++)
		write_shard(dir, (int)k, (int)shards, size / shards, &layer,
			    index, &first);
	fprintf(index, "\n  }\n}\n");
	if (fclose(index))
		die("cannot write", path);
	return 0;
}
