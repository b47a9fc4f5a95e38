/* SPDX-License-Identifier: MIT */
/*
 * publish.h - one generation of a published model: its files mapped and
 * registered with the seed's transports, its manifest.  Built in two
 * steps so that a bad file is refused before the fabric is touched:
 * prepare (walk, map, validate: no fabric) and publish (register,
 * checksum, encode).  Only seed/ includes this.  Not thread safe: the
 * seed builds a generation in one thread, then shares it read-only.
 */
#ifndef SFS_PUBLISH_H
#define SFS_PUBLISH_H

#include "seed/seed.h"

#include <stddef.h>
#include <stdint.h>

struct sfs_manifest;
struct sfs_walk;
struct sfs_xport;
struct sfs_xport_mr;

struct seed_file {
	void *map; /* whole file, read-only; NULL when empty */
	uint64_t size;
	char *abs;		    /* files: the path mapped; owned */
	uint64_t dev, ino;	    /* files: the inode mapped */
	int64_t mtime_ns, ctime_ns; /* files: its times when mapped */
	int wd;			    /* its inotify watch, or -1 */
	int withdrawn;	   /* it changed on disk: its bytes are no longer
			      served (seed_gen_withdraw) */
	uint64_t again_ms; /* a change after that was last said (its
			      model is tried again once quiet) */
	size_t fidx;	   /* index in the manifest */
	uint32_t region0;  /* the region of its first piece (then one a
			      piece, in order) */
	uint64_t data_off; /* safetensors: bytes of header to inline */
	/* Files: CLOCK_REALTIME of the stat before its bytes were first
	 * read (kept by a generation that takes its checksums). */
	int64_t read_ns;
	/* Files: a later generation may take its checksums (reuse.c): on
	 * a filesystem whose times show every write, its dirty pages put
	 * under write-out before the stat. */
	int reusable;
	/* Prepare to publish: the generation before's checksums of it,
	 * taken (seed_reuse_find) [borrowed], or NULL: its bytes hashed. */
	const struct sfs_mfile *same;
	size_t nmr;
	struct sfs_xport_mr **mr; /* piece p, transport t: [p * nx + t] */
	/* In-memory models: @map is the caller's tensor [borrowed], one
	 * piece of manifest file @fidx, after @prefix (inline, owned). */
	int borrowed;
	uint8_t *prefix;
	size_t prefix_len;
	int last; /* the last piece of its file */
};

/* A tensor or small file of an in-memory model (libseedfs). */
struct seed_mem_tensor {
	char *name;
	char dtype[16];
	uint32_t ndim;
	uint64_t shape[16];
	const void *data; /* [borrowed] */
	uint64_t len;
	char layout[64]; /* "" : the model's */
};

struct seed_mem_file {
	char *path;
	uint8_t *data; /* owned copy */
	size_t len;
};

struct seed_mem {
	size_t ntensors, cap_tensors;
	struct seed_mem_tensor *tensors;
	size_t nfiles, cap_files;
	struct seed_mem_file *files;
	uint64_t shard_max; /* bytes of tensor data per synthesized shard */
};

struct sfs_blob;

struct seed_gen {
	uint64_t number;
	uint64_t expires_ms; /* monotonic; 0 while it is the current one */
	struct sfs_manifest *m;
	/* The encoded manifest, shared by every answer that sends it (a
	 * reference each; a rekey puts a new one here, the answers going
	 * out keep theirs).  Protected by the seed's lock once served. */
	struct sfs_blob *json;
	/* json gzipped, made at the first ask that takes it (a thousand
	 * replicas' asks cost one compression); gz_tried: made or found
	 * not smaller.  Protected by the seed's lock; gone with json. */
	struct sfs_blob *gz;
	int gz_tried;
	size_t nfiles;
	struct seed_file *files;
	uint64_t total_bytes;
	struct sfs_walk *w; /* between prepare and publish; NULL: mem */
	/* The generation before (in-memory models: unchanged files keep its
	 * times) [borrowed, set by the seed for publish], or NULL. */
	const struct sfs_manifest *prev;
	/* The seed's transports [borrowed], set by publish. */
	size_t nx;
	struct sfs_xport *const *x;
	int writable; /* map files writable before registering */
	/* Files whose checksums were taken from generation @same_from
	 * (unchanged since they were read), and their bytes, of @nreg
	 * files over --inline-max and their @reg_bytes; @nunfit of them on
	 * a filesystem whose times may not show a write (read again). */
	size_t nsame, nreg, nunfit;
	uint64_t same_bytes, same_from, reg_bytes;
	const char *protocols;
};

/*
 * seed_file_rekey - register every piece of @f (published in pieces of
 * @piece bytes) again with @g's transports: new keys.  *out [new
 * array of f->nmr registrations, same order as f->mr].  Nothing is
 * published: seed_file_rekey_publish writes their addresses and keys
 * into g->m.  Returns 0 or -errno (nothing is left registered).
 */
int seed_file_rekey(struct seed_gen *g, struct seed_file *f, uint64_t piece,
		    struct sfs_xport_mr ***out);
int seed_file_rekey_publish(struct seed_gen *g, struct seed_file *f,
			    struct sfs_xport_mr **mr);

/*
 * seed_gen_prepare - walk @cfg->model_dir, map and validate every file,
 * list files, dirs and tensors.  A file that did not change since
 * @prev (the generation before [borrowed], or NULL) read it keeps its
 * checksums (reuse.c): its bytes are not read.  *out [new], freed with
 * seed_gen_free.  Returns 0 or -errno with one line in @err.  The
 * publishing thread's (it is the one that withdraws @prev's files).
 */
int seed_gen_prepare(const struct sfs_seed_cfg *cfg, const char *name,
		     uint64_t number, uint64_t instance, uint64_t grace_s,
		     const struct seed_gen *prev, struct seed_gen **out,
		     char *err, size_t errlen);

/*
 * seed_gen_publish - register everything with the @nx transports @x
 * (one manifest endpoint each, same order), checksum, encode.  Returns 0
 * or -errno with one line in @err.
 */
int seed_gen_publish(struct seed_gen *g, const struct sfs_seed_cfg *cfg,
		     size_t nx, struct sfs_xport *const *x, int writable,
		     const char *protocols, char *err, size_t errlen);

/*
 * seed_gen_sign - sign a generation's manifest @m (or a struct copy of
 * it) with cfg->sign_key, as made now, valid for cfg->sign_validity_s
 * (signer: this host; run: its instance).  Nothing is encoded.  0 or
 * -errno.
 */
int seed_gen_sign(struct sfs_manifest *m, const struct sfs_seed_cfg *cfg);

/*
 * seed_gen_prepare_mem - list the files, synthesized shards and tensors
 * of the in-memory model @mm into @s (its manifest made).  Returns 0 or
 * -errno with one line in @err.  (memgen.c)
 */
int seed_gen_prepare_mem(struct seed_gen *s, const struct seed_mem *mm,
			 uint32_t shift, int sha256, char *err, size_t errlen);

/* seed_gen_publish_mem - register the pieces, checksum, add extents.
 * Returns 0 or -errno.  (memgen.c) */
int seed_gen_publish_mem(struct seed_gen *s, const struct sfs_seed_cfg *cfg);

/* seed_add_tensor - add a tensor to @m with the XXH3-64 of its @len
 * @bytes [borrowed].  Returns 0 or -errno. */
int seed_add_tensor(struct sfs_manifest *m, const char *name, const char *dtype,
		    uint32_t ndim, const uint64_t *shape, size_t fidx,
		    uint64_t off, uint64_t len, const void *bytes);

/* seed_piece_publish - register @f's bytes, appended to its manifest
 * file as remote extents.  Returns 0 or -errno. */
int seed_piece_publish(struct seed_gen *s, const struct sfs_seed_cfg *cfg,
		       struct seed_file *f);

/*
 * A file's digest (its whole XXH3-64) and checksums (XXH3-64 of every
 * 1 << shift bytes from its first byte; shift 0: none), fed its bytes
 * in order in pieces of any size.  start: 0 or -ENOMEM.  add: 0,
 * -ENOMEM, -EIO, or -EFAULT when the bytes are a file's mapping and the
 * file shrank under it (->fault: the address read; the sums are then
 * worth nothing but seed_sums_free).  finish: set them on file @fidx of @m (0 or -errno).  free:
 * always, after start.
 */
struct seed_sums {
	uint32_t shift;
	uint64_t *sums;
	size_t n, cap;
	uint64_t fill; /* bytes of the chunk being hashed */
	struct XXH3_state_s *chunk, *whole;
	/* With a SHA-256 of every chunk too (--digest sha256): */
	void *sha;	   /* the chunk being hashed (gnutls_hash_hd_t) */
	uint8_t *shas;	   /* 32 bytes a chunk */
	size_t sha_cap;	   /* bytes of shas */
	const void *fault; /* add's -EFAULT: the address whose page went */
};
/* seed_sums_start - a file's digest and checksums of 1 << @shift bytes
 * (0: none), with their SHA-256 if @sha256 (needs @shift). */
int seed_sums_start(struct seed_sums *ss, uint32_t shift, int sha256);
int seed_sums_add(struct seed_sums *ss, const void *data, uint64_t len);
int seed_sums_finish(struct seed_sums *ss, struct sfs_manifest *m, size_t fidx);
void seed_sums_free(struct seed_sums *ss);

/* The files of the generation before that a republish takes the
 * checksums of (reuse.c).  A file whose times were less than this
 * before the stat that preceded its first read is read again. */
#define SEED_REUSE_RACY_NS (2 * 1000000000LL)
struct seed_reuse;
/* seed_reuse_new - an index of @prev's files [borrowed: it must
 * outlive *out], or *out NULL when there is nothing to take (no @prev,
 * or an in-memory model).  0 or -ENOMEM. */
int seed_reuse_new(const struct seed_gen *prev, const struct sfs_seed_cfg *cfg,
		   struct seed_reuse **out);
void seed_reuse_free(struct seed_reuse *r);
/* seed_reuse_find - @prev's file at @rel if @f (stat filled in by
 * map_file) is the same inode, size and times, it was neither
 * withdrawn nor unwatched, and the checksums it has are those @cfg
 * asks for; else NULL. */
const struct seed_file *seed_reuse_find(const struct seed_reuse *r,
					const char *rel,
					const struct seed_file *f);
/* seed_reuse_mfile - the manifest file of @p (from seed_reuse_find). */
const struct sfs_mfile *seed_reuse_mfile(const struct seed_reuse *r,
					 const struct seed_file *p);
/* seed_reuse_tensor - 1 and *xxh3 when @p's tensor @i (in its file's
 * order) has @name, @off and @len; else 0. */
int seed_reuse_tensor(const struct seed_reuse *r, const struct seed_file *p,
		      size_t i, const char *name, uint64_t off, uint64_t len,
		      uint64_t *xxh3);
/* seed_reuse_take - file @fidx of @m gets @o's digest and checksums
 * (copied).  0 or -errno. */
int seed_reuse_take(struct sfs_manifest *m, size_t fidx,
		    const struct sfs_mfile *o);
/* seed_reuse_now_ns - CLOCK_REALTIME in ns (the clock of file times). */
int64_t seed_reuse_now_ns(void);
/* seed_reuse_ready - before the stat of a file (@fd) that a later
 * generation may take the checksums of: 1 when its filesystem is one
 * whose times show every write (ext2/3/4, XFS, Btrfs: not tmpfs, whose
 * mapped pages are never made clean, nor a network or FUSE filesystem,
 * whose times another host's clock sets) and its dirty pages were put
 * under write-out (write-protected: the next write through a mapping
 * faults, and moves mtime and ctime); else 0. */
int seed_reuse_ready(int fd);

/*
 * seed_gen_withdraw - file @i of @g changed on disk under the seed: its
 * bytes are no longer served.  Its mapping is replaced by zero pages of
 * the same size.  With checksums of its chunks published, its
 * registrations stay (until the generation or their epoch goes), so a
 * replica's read of it gets zeros, which its checksums refuse, and never
 * an error of the connection that would fail the other files' reads in
 * flight on it; without them (or when the mapping cannot be replaced)
 * they go (f->nmr is 0 then).  Returns 1 when it was served until now,
 * else 0.  Not thread safe with publishing.
 */
int seed_gen_withdraw(struct seed_gen *g, size_t i);

/* seed_gen_free - deregister, unmap, free.  NULL is fine. */
void seed_gen_free(struct seed_gen *g);

#endif /* SFS_PUBLISH_H */
