/* SPDX-License-Identifier: MIT */
/*
 * pubexample.c - the smallest libseedfs program, built by
 * tests/libseedfs_install.sh against the installed header and library
 * (pkg-config seedfs): publish one tensor and a config.json, print the
 * port, serve until stdin closes.
 */
#include <seedfs.h>

#include <stdint.h>
#include <stdio.h>
#include <string.h>

int main(void)
{
	static float w[2][3] = {{1, 2, 3}, {4, 5, 6}};
	const uint64_t shape[2] = {2, 3};
	const char *config = "{\"torch_dtype\": \"float32\"}";
	struct sfs_pub_cfg cfg = {.name = "example", .listen = "127.0.0.1:0"};
	struct sfs_pub *p;
	char err[512];
	uint64_t gen;

	if (sfs_pub_new(&cfg, &p, err, sizeof(err)) ||
	    sfs_pub_add_file(p, "config.json", config, strlen(config), err,
			     sizeof(err)) ||
	    sfs_pub_add_tensor(p, "w", "F32", 2, shape, w, sizeof(w), NULL, err,
			       sizeof(err)) ||
	    sfs_pub_commit(p, &gen, err, sizeof(err))) {
		fprintf(stderr, "pubexample: %s\n", err);
		return 1;
	}
	printf("ready %u %llu\n", sfs_pub_port(p), (unsigned long long)gen);
	fflush(stdout);
	while (getchar() != EOF)
		;
	sfs_pub_free(p);
	return 0;
}
