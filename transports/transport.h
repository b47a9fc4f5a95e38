/* SPDX-License-Identifier: MIT */
/*
 * transport.h - one-sided reads from a seed's registered memory.
 *
 * A transport is opened by protocol name ("tcp", "shm", ...); the name
 * picks a backend ops table and its parameters in one registry
 * (transport.c).  Callers above this layer never see libfabric or verbs
 * types.
 *
 * Seed side:    open(role SEED) -> mr_reg(REMOTE_READ) -> mr_export
 *               -> local_addr, published in the manifest.  The transport
 *               runs its own progress thread, so remote reads complete.
 * Replica side: open(role REPLICA) -> peer_add(seed address) ->
 *               read(peer, reads[], done, arg).  Completions are
 *               delivered by the transport's progress thread.
 *
 * Every function returns 0 or a negative errno.  A struct sfs_xport is
 * thread safe: any number of threads may post reads at once.
 */
#ifndef SFS_TRANSPORT_H
#define SFS_TRANSPORT_H

#include <stddef.h>
#include <stdint.h>

struct sfs_xport;
struct sfs_xport_mr;

enum sfs_xport_role {
	SFS_XPORT_SEED,
	SFS_XPORT_REPLICA,
};

/* Access bits for sfs_xport_mr_reg. */
#define SFS_XPORT_REMOTE_READ 0x1u /* peers may read it (seed) */
#define SFS_XPORT_LOCAL_DST 0x2u   /* local destination of reads */

#define SFS_XPORT_ADDR_MAX 256
#define SFS_XPORT_ERR_MAX 512

struct sfs_xport_cfg {
	const char *protocol; /* registry name ("tcp", "shm", ...) or "auto":
				 the first of efa, rdma, tcp that opens */
	enum sfs_xport_role role;
	const char *node;	 /* local address to bind, NULL: provider's */
	unsigned int timeout_ms; /* bound on every internal wait */
	int hmem;		 /* will register GPU memory: ask for FI_HMEM */
};

/* What a transport tells about itself (published, logged, probed). */
struct sfs_xport_info {
	char protocol[32];
	char provider[64];
	char fabric[64];
	char domain[64];
	uint64_t max_msg_size; /* one read is split at this size */
	uint64_t mr_mode;      /* provider-specific bits, for logs */
	char mr_desc[96];      /* the same, spelled out: "LOCAL|VIRT_ADDR" */
	int virt_addr;	       /* remote addresses are pointers, not offsets */
	int local_mr;	       /* local buffers must be registered */
	int pins; /* registering pins the pages (verbs, efa): memory once
		     registered cannot be given back while registered */
	/* Provider parameters a peer must share to connect, as
	 * environment settings ("FI_OFI_RXM_BUFFER_SIZE=1024"); "": none. */
	char compat[64];
	size_t addr_len;
	uint8_t addr[SFS_XPORT_ADDR_MAX];
};

/* One read from a peer into local memory. */
struct sfs_xport_rd {
	void *local;		  /* destination */
	struct sfs_xport_mr *lmr; /* registration covering @local, or NULL
				     when info.local_mr is 0 */
	uint64_t raddr; /* remote address (base from mr_export + offset) */
	uint64_t rkey;
	size_t len;
};

/*
 * Completion callback: called exactly once per successful
 * sfs_xport_read, from the progress thread (or with -ECANCELED from
 * sfs_xport_quiesce, close or reset), with 0 or a negative errno.  Must
 * not block for long and must not call back into the transport.
 */
typedef void (*sfs_xport_done_fn)(void *arg, int status);

/*
 * sfs_xport_open - open @cfg->protocol.  On failure returns -errno and
 * writes one line into @err (naming the protocol, the query that failed
 * and its error, and what to try instead).  *out [new] is freed with
 * sfs_xport_close.
 */
int sfs_xport_open(const struct sfs_xport_cfg *cfg, struct sfs_xport **out,
		   char *err, size_t errlen);

/*
 * sfs_xport_close - quiesce, free everything (a transport left with
 * reads in flight is kept instead, see sfs_xport_quiesce).  NULL is
 * fine.  No other call may run on @x concurrently.
 */
void sfs_xport_close(struct sfs_xport *x);

/*
 * sfs_xport_quiesce - stop the progress thread and end the reads in
 * flight: cancelled (their callbacks get -ECANCELED) where the backend
 * can do that safely; registrations stay valid so they can be
 * deregistered before sfs_xport_close.  Returns how many reads could
 * not be ended (libfabric: an endpoint with reads in flight is not
 * closed, see fabric_impl.h): their callbacks never come, and their
 * memory must not be freed or reused.  Reads are refused afterwards
 * (-ESHUTDOWN).  Idempotent.
 */
size_t sfs_xport_quiesce(struct sfs_xport *x);

/*
 * sfs_xport_reset - drop every connection of @x and start afresh, for a
 * connection that is wedged (no progress) or broken: reads in flight
 * complete with -ECANCELED, registrations stay valid.  Peers of backends
 * without a hello (libfabric) stay valid and the next read connects
 * again; peers of hello backends (raw verbs) are gone and must be
 * connected again (sfs_xport_hello, sfs_xport_peer_add).  Reads posted
 * meanwhile wait for it (bounded by their own timeout).  Returns 0 or
 * -errno (-EOPNOTSUPP: this backend cannot).  Thread safe, but not with
 * itself or quiesce.
 */
int sfs_xport_reset(struct sfs_xport *x);

/*
 * sfs_xport_peer_reset - the connection to @peer alone is wedged or
 * broken: make it anew (the next read to @peer connects again); the
 * other peers' reads go on undisturbed.  Reads in flight to @peer are
 * not cancelled: they complete or fail as the old connection allows.
 * Backends that cannot reset one peer reset everything
 * (sfs_xport_reset); hello backends answer -EOPNOTSUPP (remove the peer
 * and connect again).  Returns 0 or -errno.  Thread safe, but not with
 * reset or quiesce.
 */
int sfs_xport_peer_reset(struct sfs_xport *x, uint64_t peer);

/*
 * sfs_xport_peer_remove - @peer will not be read again: tear down what
 * belongs to it alone (a raw verbs queue pair, reads in flight on it
 * failing; libfabric's own connection, closed once its reads in flight
 * ended).  libfabric reuses the peer's memory for a later peer under
 * another id: @peer, kept, names nothing (reads -ENOTCONN, resets
 * -EINVAL).  Thread safe.
 */
void sfs_xport_peer_remove(struct sfs_xport *x, uint64_t peer);

/* sfs_xport_info - fill @info.  Thread safe. */
void sfs_xport_info(struct sfs_xport *x, struct sfs_xport_info *info);

/*
 * sfs_xport_mr_reg - register [buf, buf+len) with @access bits.  A seed
 * registers with SFS_XPORT_REMOTE_READ only: never remote write.
 * *out [new], freed with sfs_xport_mr_dereg (NULL is fine) before the
 * transport is closed.  Thread safe.
 */
int sfs_xport_mr_reg(struct sfs_xport *x, void *buf, size_t len,
		     unsigned int access, struct sfs_xport_mr **out);
void sfs_xport_mr_dereg(struct sfs_xport_mr *mr);

/*
 * sfs_xport_mr_reg_cuda - register CUDA device memory (a seed publishing
 * an engine's GPU-resident weights) with @access, through fi_mr_regattr
 * and FI_HMEM_CUDA.  Needs a build with -DSEEDFS_CUDA=ON and a transport
 * opened with cfg.hmem.  Returns 0, or -EOPNOTSUPP / -ENODEV / -EINVAL
 * with one line in @err.  Thread safe.
 */
int sfs_xport_mr_reg_cuda(struct sfs_xport *x, void *dptr, size_t len,
			  unsigned int access, struct sfs_xport_mr **out,
			  char *err, size_t errlen);

#define SFS_XPORT_RAWKEY_MAX 64

/*
 * sfs_xport_mr_export - what a peer needs to read this registration:
 * the remote address of its first byte and its key.  Providers that use
 * raw keys (FI_MR_RAW) give the key's bytes in @raw and their count in
 * *raw_len (up to SFS_XPORT_RAWKEY_MAX; 0 for a plain 64-bit *key), and
 * a peer turns them into a key with sfs_xport_key_import.
 */
void sfs_xport_mr_export(const struct sfs_xport_mr *mr, uint64_t *raddr,
			 uint64_t *key, uint8_t *raw, size_t *raw_len);

/*
 * sfs_xport_key_import - the key to read a peer's registration exported
 * with raw key bytes (@raw, @len) at remote address @raddr.  Imports of
 * the same bytes share one mapping; each import is given back with
 * sfs_xport_key_release (the mapping goes with the last), and whatever
 * is left goes when the transport closes.  Returns 0, -EOPNOTSUPP when
 * this backend has no raw keys, or -errno.  Thread safe.
 */
int sfs_xport_key_import(struct sfs_xport *x, uint64_t raddr,
			 const uint8_t *raw, size_t len, uint64_t *key);

/* sfs_xport_key_release - one import of @key (sfs_xport_key_import) is no
 * longer used.  Nothing for backends without raw keys.  Thread safe. */
void sfs_xport_key_release(struct sfs_xport *x, uint64_t key);

/*
 * sfs_xport_peer_add - make the seed at fabric address @addr readable;
 * *peer is passed to sfs_xport_read.  Returns 0, -EINVAL for an address
 * of the wrong form, or -errno.  Thread safe.
 */
int sfs_xport_peer_add(struct sfs_xport *x, const void *addr, size_t len,
		       uint64_t *peer);

/*
 * sfs_xport_read - post @n reads from @peer, each split at the
 * provider's max_msg_size.  Returns 0 when posted: @done(@arg, status)
 * will then be called once when all of them completed (status is the
 * first error).  Returns -errno when nothing was posted (@done is not
 * called): -EAGAIN when the provider is busy (connecting, or full) for
 * a moment: try again soon; -ESHUTDOWN once quiesced; -ETIMEDOUT when
 * part of the read went out and the provider stayed busy past the
 * timeout for the rest.  Destination memory belongs to the transport
 * until @done runs.  Thread safe.
 */
int sfs_xport_read(struct sfs_xport *x, uint64_t peer,
		   const struct sfs_xport_rd *rds, size_t n,
		   sfs_xport_done_fn done, void *arg);

/*
 * Connection exchange, for backends whose peers must set up a connection
 * together (raw verbs RC queue pairs).  The replica makes a hello
 * (sfs_xport_hello), the seed's control port hands it to sfs_xport_accept,
 * and the reply is given to sfs_xport_peer_add in place of the published
 * address.  Hellos and replies are untrusted input and are validated.
 *
 * sfs_xport_needs_hello - 1 for such backends, 0 otherwise.
 * sfs_xport_hello - replica: up to SFS_XPORT_HELLO_MAX bytes into @buf,
 *   length into *len.  0 or -errno.  Thread safe.
 * sfs_xport_accept - seed: answer @hello from @client (its address, for
 *   limits and logs) with a reply (up to SFS_XPORT_HELLO_MAX bytes).
 *   0, -EINVAL for a bad hello, -EMFILE when too many peers are
 *   connected, -EUSERS when @client has too many, or -errno.  Peers that
 *   went away are found and torn down in the background.  Thread safe.
 * sfs_xport_hello_abort - replica: @hello will never be answered (the
 *   exchange failed): free what it set up.  Thread safe.
 */
#define SFS_XPORT_HELLO_MAX 256
int sfs_xport_needs_hello(struct sfs_xport *x);
int sfs_xport_hello(struct sfs_xport *x, void *buf, size_t *len);
int sfs_xport_accept(struct sfs_xport *x, const void *hello, size_t len,
		     const char *client, void *reply, size_t *rlen);
void sfs_xport_hello_abort(struct sfs_xport *x, const void *hello, size_t len);

/*
 * Incoming connections to this process's libfabric listeners (tcp and
 * sockets; every rxm endpoint listens): what the caps did
 * (transports/fabcap.c, docs/deploying.md).  Counters since the start,
 * for the whole process.
 */
struct sfs_xport_listen_stats {
	int capped;		/* 1: caps in force (the seedfs command); 0: not
			       (a program embedding libseedfs) */
	unsigned int open;	/* connections accepted and kept, now */
	uint64_t refused_host;	/* reset: over the cap per host */
	uint64_t refused_total; /* reset: over the cap in all */
	uint64_t refused_files; /* reset: into the reserve of open files */
	uint64_t late_reset;	/* reset: no connection request in time */
	uint64_t room_reset;	/* reset while waiting for its request, to
				   make room for a newer one at a cap */
};

/* sfs_xport_listen_stats - fill @st.  Thread safe. */
void sfs_xport_listen_stats(struct sfs_xport_listen_stats *st);

struct sfs_metrics;
/* sfs_xport_listen_metrics - the same as Prometheus families
 * (seedfs_fabric_conn*; docs/metrics.md) into @m. */
void sfs_xport_listen_metrics(struct sfs_metrics *m);

#define SFS_XPORT_AUTO "auto"

/*
 * sfs_xport_route_node - the local address to bind @protocol's endpoint
 * to so that it reaches the peer whose fabric address is @addr (@len
 * bytes, as published): the address the kernel's routing table picks
 * for that peer, as text into @node.  A replica binds there, so the
 * listener a provider opens for connections back (rxm) is on that
 * interface alone, not on every one.  Returns 0, -ENOENT when
 * @protocol binds no IP address or @addr is no IPv4/IPv6 socket
 * address, or -errno from the routing lookup.  Thread safe.
 */
int sfs_xport_route_node(const char *protocol, const uint8_t *addr, size_t len,
			 char *node, size_t nodelen);

/*
 * sfs_xport_known - 1 if @protocol is a registered name or "auto".
 * Fills @list (when non-NULL) with every name, comma separated.
 */
int sfs_xport_known(const char *protocol, char *list, size_t len);

/*
 * sfs_xport_choose - the protocol asked for: @option when given (non-NULL,
 * non-empty), else @env (SEEDFS_PROTOCOL), else NULL (the caller's
 * default).  The option always wins.
 */
const char *sfs_xport_choose(const char *option, const char *env);

/* The registered protocols, for listing and probing: 0..count-1. */
size_t sfs_xport_count(void);
const char *sfs_xport_name(size_t i);

#endif /* SFS_TRANSPORT_H */
