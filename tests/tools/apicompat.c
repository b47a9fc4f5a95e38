/* SPDX-License-Identifier: MIT */
/*
 * apicompat.c - a program built against the seedfs.h of ABI node
 * SEEDFS_0.1, whose struct sfs_client_cfg ends before trust_key: it
 * binds sfs_client_open@SEEDFS_0.1, as such a program does, and passes
 * its shorter cfg with 0xff bytes after it (what a caller's stack may
 * hold there).  That sfs_client_open must read none of them.
 *
 *   apicompat SEEDS MODEL
 *
 * Prints "apicompat: MODEL generation G, N tensors" and exits 0, or the
 * error line and exits 1.  $SEEDFS_TRUST_KEY_FILE applies as ever.
 */
#include <seedfs.h>

#include <stdio.h>
#include <string.h>

/* struct sfs_client_cfg as SEEDFS_0.1 and 0.2 declared it. */
struct cfg_0_1 {
	const char *seeds;
	const char *registry;
	const char *registry_ca;
	const char *registry_auth_file;
	const char *protocol;
	unsigned int timeout_ms;
	uint64_t cache_size;
	int no_verify;
	const char *log_level;
	const char *token_file;
	const char *tls_ca, *tls_pin;
};

int open_0_1(const struct cfg_0_1 *cfg, const char *model,
	     struct sfs_client **out, char *err, size_t errlen);
__asm__(".symver open_0_1, sfs_client_open@SEEDFS_0.1");

int main(int argc, char **argv)
{
	struct {
		struct cfg_0_1 cfg;
		unsigned char after[64];
	} s;
	struct sfs_client *c;
	struct sfs_client_info info;
	char err[512];

	if (argc != 3) {
		fprintf(stderr, "usage: apicompat SEEDS MODEL\n");
		return 2;
	}
	memset(&s, 0xff, sizeof(s));
	memset(&s.cfg, 0, sizeof(s.cfg));
	s.cfg.seeds = argv[1];
	if (open_0_1(&s.cfg, argv[2], &c, err, sizeof(err))) {
		fprintf(stderr, "apicompat: %s\n", err);
		return 1;
	}
	sfs_client_info(c, &info);
	printf("apicompat: %s generation %llu, %zu tensors\n", info.model,
	       (unsigned long long)info.generation, info.ntensors);
	sfs_client_close(c);
	return 0;
}
