/* SPDX-License-Identifier: MIT */
/*
 * genmanifest - the manifest a seed of a large model would publish, for
 * sizing the JSON limits (metadata/jsonlim.h), and what parsing one
 * costs:
 *
 *   genmanifest OUT [--tensors N] [--files N] [--bytes SIZE]
 *               [--csum-chunk SIZE] [--model NAME]
 *   genmanifest --measure FILE [KIND]
 *
 * The first writes a valid manifest (version 4) of N tensors (default
 * 1000000) in N files (default 163) of SIZE bytes in all (default 700G),
 * each file an inline header and one region, with a checksum per
 * --csum-chunk (default 1M).  The second reads FILE and prints its
 * bytes, JSON values and depth, the time of the scan and of jansson's
 * parse, the heap jansson holds for it, and whether the limits of KIND
 * (default manifest; a number: its enum sfs_json_kind) let it in.
 */
#include "common/util.h"
#include "metadata/jsonlim.h"
#include "metadata/manifest.h"

#include <inttypes.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int measure(const char *path, int kind)
{
	FILE *f = fopen(path, "rb");
	if (!f) {
		perror(path);
		return 1;
	}
	fseek(f, 0, SEEK_END);
	long len = ftell(f);
	fseek(f, 0, SEEK_SET);
	char *buf = malloc((size_t)len + 1);
	if (!buf || fread(buf, 1, (size_t)len, f) != (size_t)len) {
		fprintf(stderr, "genmanifest: cannot read %s\n", path);
		return 1;
	}
	fclose(f);
	struct sfs_json_count c;
	uint64_t t0 = sfs_now_ns();
	sfs_json_scan(buf, (size_t)len, &c);
	size_t n = c.values;
	uint64_t t1 = sfs_now_ns();
	struct mallinfo2 before = mallinfo2();
	json_error_t je;
	uint64_t t2 = sfs_now_ns();
	json_t *o = json_loadb(buf, (size_t)len, 0, &je);
	uint64_t t3 = sfs_now_ns();
	struct mallinfo2 after = mallinfo2();
	const struct sfs_json_limit *lim = sfs_json_limit(kind);
	printf("bytes %ld values %zu containers %zu depth %zu scan %.3f s (%.0f MB/s) "
	       "jansson %.3f s heap %.1f MiB (%.1f bytes a value) %s: %s "
	       "(limits %zu values, depth %zu)\n",
	       len, n, c.containers, c.depth, (double)(t1 - t0) / 1e9,
	       (double)len / ((double)(t1 - t0) / 1e9) / 1e6,
	       (double)(t3 - t2) / 1e9,
	       (double)(after.uordblks - before.uordblks) / 1048576.0,
	       n ? (double)(after.uordblks - before.uordblks) / (double)n : 0,
	       lim->what,
	       n <= lim->values && c.containers <= lim->containers &&
			       c.depth <= lim->depth
		       ? "accepted"
		       : "refused",
	       lim->values, lim->depth);
	if (!o)
		printf("jansson: %s\n", je.text);
	json_decref(o);
	if (kind == SFS_JSON_MANIFEST) {
		struct sfs_manifest *m;
		char err[512];
		uint64_t t4 = sfs_now_ns();
		int rc = sfs_manifest_decode(buf, (size_t)len, &m, err,
					     sizeof(err));
		printf("sfs_manifest_decode: %.3f s: %s\n",
		       (double)(sfs_now_ns() - t4) / 1e9, rc ? err : "ok");
		if (!rc)
			sfs_manifest_free(m);
	}
	free(buf);
	return 0;
}

int main(int argc, char **argv)
{
	uint64_t tensors = 1000000, files = 163, bytes = 700ull << 30;
	uint64_t chunk = 1u << 20;
	const char *out = NULL, *model = "big";

	if (argc >= 3 && !strcmp(argv[1], "--measure"))
		return measure(argv[2], argc > 3 ? atoi(argv[3]) : 0);
	for (int i = 1; i < argc; i++) {
		if (!strcmp(argv[i], "--tensors") && i + 1 < argc)
			sfs_parse_u64(argv[++i], &tensors);
		else if (!strcmp(argv[i], "--files") && i + 1 < argc)
			sfs_parse_u64(argv[++i], &files);
		else if (!strcmp(argv[i], "--bytes") && i + 1 < argc)
			sfs_parse_size(argv[++i], &bytes);
		else if (!strcmp(argv[i], "--csum-chunk") && i + 1 < argc)
			sfs_parse_size(argv[++i], &chunk);
		else if (!strcmp(argv[i], "--model") && i + 1 < argc)
			model = argv[++i];
		else if (!out && argv[i][0] != '-')
			out = argv[i];
		else
			out = NULL, i = argc;
	}
	if (!out || !files || !tensors || tensors < files || chunk < 4096 ||
	    (chunk & (chunk - 1))) {
		fprintf(stderr, "usage: genmanifest OUT [--tensors N] [--files "
				"N] [--bytes SIZE] [--csum-chunk SIZE] "
				"[--model NAME]\n"
				"       genmanifest --measure FILE [KIND]\n");
		return 2;
	}
	uint32_t shift = (uint32_t)__builtin_ctzll(chunk);
	struct sfs_manifest *m = sfs_manifest_new(model, 1);
	uint8_t addr[16] = {2, 0, 0x1b, 0x9e, 127, 0, 0, 1};
	static const char hdr[64] = "{\"__metadata__\":{\"format\":\"pt\"}}";
	uint64_t per_file = bytes / files, per_tensor_n = tensors / files;
	int rc = sfs_manifest_add_endpoint(m, "tcp", "tcp;ofi_rxm", NULL, addr,
					   sizeof(addr));
	uint64_t *sums = NULL, nt = 0;
	for (uint64_t i = 0; !rc && i < files; i++) {
		char path[64];
		size_t fi;
		uint32_t reg;
		uint64_t len = per_file - sizeof(hdr);
		snprintf(path, sizeof(path),
			 "model-%05" PRIu64 "-of-%05" PRIu64 ".safetensors",
			 i + 1, files);
		rc = sfs_manifest_add_file(m, path, &fi) ||
		     sfs_manifest_add_inline(m, fi, hdr, sizeof(hdr)) ||
		     sfs_manifest_add_region(m, len, &reg) ||
		     sfs_manifest_add_remote(m, fi, reg, 0, len);
		if (rc)
			break;
		sfs_manifest_set_remote(m, reg, 0, 0x7f0000000000ull + i * len,
					0x1234567890abcdefull ^ i);
		m->files[fi].has_xxh3 = 1;
		m->files[fi].xxh3 = 0x0123456789abcdefull * (i + 1);
		uint64_t ns = sfs_csum_count(m->files[fi].size, shift);
		free(sums);
		sums = malloc(ns * sizeof(*sums));
		for (uint64_t k = 0; sums && k < ns; k++)
			sums[k] = 0x9e3779b97f4a7c15ull * (k + i + 1);
		rc = !sums ||
		     sfs_manifest_set_checksums(m, fi, shift, sums, (size_t)ns);
		uint64_t k_n = i + 1 == files ? tensors - nt : per_tensor_n;
		uint64_t tlen = len / k_n & ~127ull;
		for (uint64_t k = 0; !rc && k < k_n; k++, nt++) {
			char name[128];
			uint64_t shape[2] = {tlen / 128, 64};
			snprintf(name, sizeof(name),
				 "model.layers.%" PRIu64 ".mlp.experts.%" PRIu64
				 ".down_proj.weight",
				 nt / 768, nt % 768);
			rc = sfs_manifest_add_tensor(m, name, "BF16", 2, shape,
						     fi, sizeof(hdr) + k * tlen,
						     tlen);
			m->tensors[m->ntensors - 1].has_xxh3 = 1;
			m->tensors[m->ntensors - 1].xxh3 = nt * 7919;
		}
	}
	free(sums);
	char *json = NULL, err[512];
	size_t jl = 0;
	if (!rc && (rc = sfs_manifest_validate(m, err, sizeof(err))))
		fprintf(stderr, "genmanifest: %s\n", err);
	if (!rc)
		rc = sfs_manifest_encode(m, &json, &jl);
	FILE *f = rc ? NULL : fopen(out, "wb");
	if (!f || fwrite(json, 1, jl, f) != jl || fclose(f)) {
		fprintf(stderr, "genmanifest: cannot write %s\n", out);
		return 1;
	}
	printf("%s: %zu bytes, %zu files, %zu tensors\n", out, jl, m->nfiles,
	       m->ntensors);
	free(json);
	sfs_manifest_free(m);
	return 0;
}
