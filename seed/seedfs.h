/* SPDX-License-Identifier: MIT */
/*
 * seedfs.h - libseedfs: publish tensors that live in memory, as a seed.
 *
 * An inference engine holds its weights in memory.  With libseedfs it
 * publishes them without files: replicas mount them (seedfs mount) and
 * see safetensors shards synthesized from the tensors, with
 * model.safetensors.index.json and the small files given (config.json,
 * tokenizer), and read the bytes with one-sided reads straight from the
 * engine's memory.
 *
 *   struct sfs_pub *p;
 *   struct sfs_pub_cfg cfg = {.name = "llama-8b", .listen = "0.0.0.0:7070"};
 *   sfs_pub_new(&cfg, &p, err, sizeof(err));
 *   sfs_pub_add_file(p, "config.json", cfg_json, cfg_len, err, ...);
 *   sfs_pub_add_tensor(p, "model.embed_tokens.weight", "BF16", 2, shape,
 *                      ptr, bytes, NULL, err, ...);
 *   sfs_pub_commit(p, &generation, err, ...);   now served
 *   ... update tensors in place ...
 *   sfs_pub_commit(p, &generation, err, ...);   generation + 1
 *   sfs_pub_free(p);
 *
 * Memory: tensor memory is borrowed.  It must stay valid while any
 * generation that lists it is served: until the next commit plus the
 * grace period, or sfs_pub_free.  It is registered for remote read only.
 * Updating a tensor in place changes what the served generation holds:
 * replicas verify checksums and refuse such bytes (EIO) rather than mix
 * generations, so commit right after an update, and use grace 0 when
 * you update in place.
 *
 * Errors: functions return 0 or a negative errno and write one line
 * into @err.  Thread safety: one struct sfs_pub is used by one thread at
 * a time; distinct ones are independent.
 */
#ifndef SEEDFS_H
#define SEEDFS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

struct sfs_pub;

struct sfs_pub_cfg {
	const char *name;      /* model name: the directory replicas see */
	const char *listen;    /* control port HOST:PORT; NULL 0.0.0.0:7070;
				 port 0 picks a free one (sfs_pub_port) */
	const char *protocol;  /* tcp, rdma, efa, shm, auto, or a list;
				 NULL: $SEEDFS_PROTOCOL, else tcp */
	const char *identity;  /* "K=V,..." as seedfs seed --identity; NULL */
	unsigned int grace_s;  /* a superseded generation stays served */
	uint64_t shard_max;    /* tensor bytes per shard; 0: 4 GiB */
	const char *log_level; /* err, warn, info, debug; NULL: warn */
};

/* sfs_pub_new - check @cfg; nothing is served before the first commit.
 * *out [new].  Returns 0, -EINVAL or -ENOMEM. */
int sfs_pub_new(const struct sfs_pub_cfg *cfg, struct sfs_pub **out, char *err,
		size_t errlen);

/*
 * sfs_pub_add_tensor - stage tensor @name (safetensors dtype: F32, BF16,
 * ...; row-major @shape of @ndim <= 16 dims) at @data, @len bytes
 * [borrowed], with its own @layout or NULL (the model's).  A name staged
 * before is replaced.  Shown at the next commit, in the order added.
 * Returns 0, -EINVAL (bad name, dtype, shape, or @len not shape x dtype
 * size) or -ENOMEM.
 */
int sfs_pub_add_tensor(struct sfs_pub *p, const char *name, const char *dtype,
		       uint32_t ndim, const uint64_t *shape, const void *data,
		       uint64_t len, const char *layout, char *err,
		       size_t errlen);

/* sfs_pub_add_file - stage a small file (copied), e.g. config.json; a
 * path staged before is replaced.  Returns 0, -EINVAL (bad path, or a
 * name the shards use) or -ENOMEM. */
int sfs_pub_add_file(struct sfs_pub *p, const char *path, const void *data,
		     size_t len, char *err, size_t errlen);

/*
 * sfs_pub_commit - publish what is staged as the next generation (the
 * first: open the transports and the control port).  The previous
 * generation stays served for the grace period.  *generation: its
 * number.  Returns 0 or -errno; on failure the previous generation goes
 * on being served.
 */
int sfs_pub_commit(struct sfs_pub *p, uint64_t *generation, char *err,
		   size_t errlen);

/* sfs_pub_port - the control port bound, once committed; else 0. */
unsigned int sfs_pub_port(const struct sfs_pub *p);

/* sfs_pub_free - stop serving, deregister, free.  NULL is fine. */
void sfs_pub_free(struct sfs_pub *p);

#ifdef __cplusplus
}
#endif

#endif /* SEEDFS_H */
