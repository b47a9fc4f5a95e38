/* SPDX-License-Identifier: MIT */
/*
 * fsops.c - the FUSE low-level operations.
 *
 * Names and attributes come from the tree, under fs->lock (a new
 * generation rewrites it).  An open file holds the generation it was
 * opened in and reads only through it, never through the tree: its
 * bytes are that generation's until the seed stops serving it, then
 * ESTALE.  Opening a file that a newer generation replaced answers
 * ESTALE too: the kernel then walks the path again with revalidation
 * and opens the new inode (close-to-open, as with NFS).
 */
#include "fsops.h"

#include "common/log.h"
#include "common/plant.h"
#include "common/util.h"
#include "fs/readq.h"
#include "metadata/manifest.h"
#include "replica/readahead.h"
#include "replica/model.h"
#include "replica/replica.h"
#include "replica/tree.h"
#include "replica/tview.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>

/* What an open file needs, copied from the tree at open. */
struct open_file {
	enum sfs_node_kind kind;
	struct sfs_view *view; /* all but STATUS: holds a reference */
	const struct sfs_mtensor *tensor; /* TENSOR, TJSON: in view->m */
	/* FILE, TENSOR: what the replica reads (its file is in view->m,
	 * a tensor's bytes from its base); TJSON: its file */
	struct sfs_rfile rf;
	/* For logs [owned]: a copy of the node's, which may go while the
	 * handle is open (a later generation that kept the node went). */
	char *path;
	uint64_t size;
	const uint8_t *blob; /* BLOB: in view->json */
	char *text;	     /* STATUS: the snapshot, owned */
	pthread_mutex_t lock;
	struct sfs_ra ra; /* FILE, TENSOR: protected by lock */
	/* Reads still replying, and whether RELEASE came meanwhile: the
	 * kernel may release a handle as soon as it has our reply, while
	 * the replying thread is still inside fuse_reply_*.  The last one
	 * out frees.  Both protected by lock. */
	unsigned int inflight;
	int released;
	/* Every open handle, for those the kernel never releases (an
	 * unmount): protected by fs->handles_lock. */
	struct open_file *prev, *next;
};

static struct sfs_fs *fs_of(fuse_req_t req)
{
	return fuse_req_userdata(req);
}

/*
 * The attributes of @n: the seed's time and permission bits where it
 * published them (so rsync and make see a file as unchanged across
 * remounts), else the mount's time; directories count their listed
 * subdirectories in nlink, as find expects.  Never setuid: the bits
 * above 0777 are dropped.
 */
static void fill_attr(const struct sfs_fs *fs, uint64_t ino,
		      const struct sfs_node *n, struct stat *st)
{
	memset(st, 0, sizeof(*st));
	st->st_ino = ino;
	st->st_uid = fs->uid;
	st->st_gid = fs->gid;
	st->st_atim = st->st_mtim = st->st_ctim = fs->mtime;
	if (n->meta.has)
		st->st_atim = st->st_mtim = st->st_ctim =
			sfs_ns_timespec(n->meta.mtime_ns);
	st->st_blksize = 1 << 20;
	if (n->kind == SFS_NODE_DIR) {
		st->st_mode =
			S_IFDIR | (n->meta.has ? n->meta.mode & 0777 : 0555);
		st->st_nlink = 2 + n->nsubdirs;
		st->st_size = 4096;
	} else {
		st->st_mode =
			S_IFREG | (n->meta.has ? n->meta.mode & 0777 : 0444);
		st->st_nlink = 1;
		st->st_size = (off_t)n->size;
		st->st_blocks = (blkcnt_t)((n->size + 511) / 512);
	}
}

/* A file's attributes never change (a new generation's changed files
 * are new inodes): kept long.  A directory's (its time, its nlink) do
 * with a generation: kept as briefly as names. */
static double attr_timeout(const struct sfs_fs *fs, const struct sfs_node *n)
{
	return n->kind == SFS_NODE_DIR ? fs->entry_timeout : fs->attr_timeout;
}

static void op_init(void *userdata, struct fuse_conn_info *conn)
{
	struct sfs_fs *fs = userdata;

	/* Reads may be answered out of order: the kernel's read-ahead
	 * keeps several requests in flight. */
	if (conn->capable & FUSE_CAP_ASYNC_READ)
		conn->want |= FUSE_CAP_ASYNC_READ;
	/* An inode's bytes never change: a new generation's changed
	 * files are new inodes. */
	conn->want &= ~FUSE_CAP_AUTO_INVAL_DATA;
	if (fs->max_background)
		conn->max_background = fs->max_background;
#ifdef SEEDFS_FUSE_DIO_MMAP
	/* -o direct_io and mmap together, where kernel and libfuse can. */
	if (conn->capable & FUSE_CAP_DIRECT_IO_ALLOW_MMAP)
		conn->want |= FUSE_CAP_DIRECT_IO_ALLOW_MMAP;
#endif
	SFS_LOG(SFS_DEBUG, "fs",
		"init: proto %u.%u max_readahead %u "
		"max_read %u",
		conn->proto_major, conn->proto_minor, conn->max_readahead,
		conn->max_read);
}

/* A model hidden by --require has no file whose open would revalidate:
 * looking in the mount's root does it instead (not for .seedfs: the
 * status file answers whether or not the seed does). */
static void revalidate_hidden(struct sfs_fs *fs, fuse_ino_t dir,
			      const char *name)
{
	if (dir == SFS_ROOT_INO && (!name || strcmp(name, SFS_MF_RESERVED)) &&
	    sfs_replica_hidden(fs->r, NULL, 0))
		sfs_replica_revalidate(fs->r, SFS_ROOT_INO);
}

/* Look @name up in @parent (fs->lock held); fills @e when found. */
static uint64_t lookup_locked(struct sfs_fs *fs, fuse_ino_t parent,
			      const char *name, struct fuse_entry_param *e)
{
	uint64_t ino = sfs_tree_lookup(fs->tree, parent, name);
	if (ino) {
		const struct sfs_node *n = sfs_tree_get(fs->tree, ino);
		e->ino = ino;
		e->generation = 1;
		e->attr_timeout = attr_timeout(fs, n);
		fill_attr(fs, ino, n, &e->attr);
	}
	return ino;
}

/* @ino is .seedfs or under it: names there do not follow the seed. */
static int in_debug_view(struct sfs_fs *fs, uint64_t ino)
{
	int in = 0;
	pthread_rwlock_rdlock(fs->lock);
	for (int depth = 0; ino != SFS_ROOT_INO && depth < 8 && !in; depth++) {
		const struct sfs_node *n = sfs_tree_get(fs->tree, ino);
		if (!n)
			break;
		in = !strcmp(n->name, SFS_MF_RESERVED);
		ino = n->parent;
	}
	pthread_rwlock_unlock(fs->lock);
	return in;
}

static void op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct sfs_fs *fs = fs_of(req);
	struct fuse_entry_param e;

	revalidate_hidden(fs, parent, name);
	memset(&e, 0, sizeof(e));
	/* Names may change with a generation: kept briefly. */
	e.entry_timeout = fs->entry_timeout;
	pthread_rwlock_rdlock(fs->lock);
	uint64_t ino = lookup_locked(fs, parent, name, &e);
	pthread_rwlock_unlock(fs->lock);
	if (!ino && strcmp(name, SFS_MF_RESERVED) &&
	    !in_debug_view(fs, parent)) {
		/* Not there: perhaps in a generation published since.  Ask
		 * (at most every 200 ms, waiting a second at most), so a
		 * program polling for a new file sees it soon; a miss is
		 * kept by the kernel as briefly. */
		sfs_replica_revalidate_missing(fs->r, parent);
		pthread_rwlock_rdlock(fs->lock);
		ino = lookup_locked(fs, parent, name, &e);
		pthread_rwlock_unlock(fs->lock);
		if (!ino)
			e.entry_timeout = fs->negative_timeout;
	}
	fuse_reply_entry(req, &e);
}

static void op_getattr(fuse_req_t req, fuse_ino_t ino,
		       struct fuse_file_info *fi)
{
	struct sfs_fs *fs = fs_of(req);
	struct stat st;

	pthread_rwlock_rdlock(fs->lock);
	const struct sfs_node *n = sfs_tree_get(fs->tree, ino);
	double timeout = n ? attr_timeout(fs, n) : 0;
	int err = n ? 0 : sfs_tree_gone_err(fs->tree, ino);
	if (n)
		fill_attr(fs, ino, n, &st);
	pthread_rwlock_unlock(fs->lock);
	if (n)
		fuse_reply_attr(req, &st, timeout);
	else
		fuse_reply_err(req, err);
}

static void op_opendir(fuse_req_t req, fuse_ino_t ino,
		       struct fuse_file_info *fi)
{
	struct sfs_fs *fs = fs_of(req);
	revalidate_hidden(fs, ino, NULL);
	pthread_rwlock_rdlock(fs->lock);
	const struct sfs_node *n = sfs_tree_get(fs->tree, ino);
	int err = !n			    ? sfs_tree_gone_err(fs->tree, ino)
		  : n->kind != SFS_NODE_DIR ? ENOTDIR
					    : 0;
	pthread_rwlock_unlock(fs->lock);
	if (err) {
		fuse_reply_err(req, err);
		return;
	}
	/* Listings may change with a generation: cached per open only. */
	fi->cache_readdir = 1;
	fuse_reply_open(req, fi);
}

static void op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		       struct fuse_file_info *fi)
{
	struct sfs_fs *fs = fs_of(req);
	size_t used = 0;
	char *buf = malloc(size);

	if (!buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	pthread_rwlock_rdlock(fs->lock);
	const struct sfs_node *n = sfs_tree_get(fs->tree, ino);
	if (!n || n->kind != SFS_NODE_DIR) {
		int err = n ? ENOTDIR : sfs_tree_gone_err(fs->tree, ino);
		pthread_rwlock_unlock(fs->lock);
		free(buf);
		fuse_reply_err(req, err);
		return;
	}
	/* Offsets: 0 "." , 1 "..", 2+i child i; each entry carries the
	 * offset of the next one. */
	for (size_t i = (size_t)off; i < n->nchild + 2; i++) {
		struct stat st = {0};
		const char *name;
		if (i == 0) {
			name = ".";
			st.st_ino = ino;
			st.st_mode = S_IFDIR;
		} else if (i == 1) {
			name = "..";
			st.st_ino = n->parent;
			st.st_mode = S_IFDIR;
		} else {
			uint64_t c = n->child[i - 2];
			const struct sfs_node *cn = sfs_tree_get(fs->tree, c);
			/* .seedfs: by name only, not in listings. */
			if (sfs_tree_hidden(fs->tree, ino, cn))
				continue;
			name = cn->name;
			st.st_ino = c;
			st.st_mode =
				cn->kind == SFS_NODE_DIR ? S_IFDIR : S_IFREG;
		}
		size_t len = fuse_add_direntry(req, buf + used, size - used,
					       name, &st, (off_t)(i + 1));
		if (len > size - used)
			break;
		used += len;
	}
	pthread_rwlock_unlock(fs->lock);
	fuse_reply_buf(req, buf, used);
	free(buf);
}

static void open_file_free(struct sfs_fs *fs, struct open_file *h)
{
	if (!h)
		return;
	pthread_mutex_lock(&fs->handles_lock);
	if (h->prev)
		h->prev->next = h->next;
	else if (fs->handles == h)
		fs->handles = h->next;
	if (h->next)
		h->next->prev = h->prev;
	pthread_mutex_unlock(&fs->handles_lock);
	if (h->view)
		sfs_replica_unref(fs->r, h->view);
	free(h->text);
	free(h->path);
	pthread_mutex_destroy(&h->lock);
	free(h);
}

/* Bind @h to what the tree says of @ino now (fs->lock held). */
static int bind_node(struct sfs_fs *fs, uint64_t ino, struct open_file *h)
{
	const struct sfs_node *n = sfs_tree_get(fs->tree, ino);
	if (!n) /* never, or its generation went (ESTALE) */
		return sfs_tree_gone_err(fs->tree, ino);
	if (n->kind == SFS_NODE_DIR)
		return EISDIR;
	/* A newer generation replaced it: the kernel walks the path
	 * again and finds the new inode. */
	if (n->superseded)
		return ESTALE;
	h->kind = n->kind;
	if (!(h->path = strdup(n->path)))
		return ENOMEM;
	h->size = n->size;
	if (n->kind != SFS_NODE_STATUS && n->kind != SFS_NODE_METRICS) {
		if (sfs_replica_ref(fs->r, n->owner))
			return ESTALE;
		h->view = n->owner;
		h->tensor = n->tensor;
		h->blob = n->blob;
		h->rf.view = n->owner;
		h->rf.file = n->file;
		h->rf.set = n->set;
		h->rf.obj =
			n->file ? (uint32_t)(n->file - h->view->m->files) : 0;
		h->rf.base = n->base;
		h->rf.size = n->size;
		h->rf.ra_lock = &h->lock;
		h->rf.ra = &h->ra;
	}
	return 0;
}

/* Bytes of @h's tensor in memory now. */
static uint64_t tensor_cached(struct sfs_fs *fs, const struct open_file *h)
{
	struct sfs_rfile f = h->rf;
	f.base = h->tensor->off;
	f.size = h->tensor->len;
	return sfs_replica_resident(fs->r, &f, 0, h->tensor->len);
}

/* Open @ino: close-to-open first when @ask (the seed's current
 * generation, before binding), then bind a handle and answer. */
static void open_node(fuse_req_t req, struct sfs_fs *fs, fuse_ino_t ino,
		      struct fuse_file_info *fi, int ask)
{
	struct open_file *h;
	int err;

	if (ask)
		sfs_replica_revalidate(fs->r, ino);
	if (!(h = calloc(1, sizeof(*h)))) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	pthread_mutex_init(&h->lock, NULL);
	pthread_rwlock_rdlock(fs->lock);
	err = bind_node(fs, ino, h);
	pthread_rwlock_unlock(fs->lock);
	if (!err && h->kind == SFS_NODE_TJSON) {
		/* Rendered per open: how much is cached changes. */
		err = -sfs_tview_json(h->view->m, h->tensor, fs->tree->seed,
				      tensor_cached(fs, h), &h->text, &h->size);
		fi->direct_io = 1;
	}
	if (!err && h->kind == SFS_NODE_STATUS) {
		/* A snapshot per open, read to EOF whatever stat says. */
		int rc = sfs_replica_status(fs->r, &h->text, &h->size);
		err = -rc;
		fi->direct_io = 1;
	}
	if (!err && h->kind == SFS_NODE_METRICS) {
		int rc = sfs_replica_metrics(fs->r, &h->text, &h->size);
		err = -rc;
		fi->direct_io = 1;
	}
	if (err) {
		open_file_free(fs, h);
		fuse_reply_err(req, err);
		return;
	}
	pthread_mutex_lock(&fs->handles_lock);
	h->next = fs->handles;
	if (h->next)
		h->next->prev = h;
	fs->handles = h;
	pthread_mutex_unlock(&fs->handles_lock);
	fi->fh = (uint64_t)(uintptr_t)h;
	/* -o direct_io: reads of a file come from the mount's cache each
	 * time, with no copy into the page cache (no mmap then). */
	if (!err && fs->direct_io && h->kind == SFS_NODE_FILE)
		fi->direct_io = 1;
	/* An inode's bytes never change: keep its page cache. */
	fi->keep_cache = !fi->direct_io;
	fi->noflush = 1;
	fuse_reply_open(req, fi);
}

/* May an operation that can wait on a source run on this libfuse
 * worker?  Yes (1) while fewer than SFS_FS_WORKER_WAITS do: call
 * worker_done after it.  No (0): hand it to fs->readq. */
static int worker_take(struct sfs_fs *fs)
{
	if (atomic_fetch_add(&fs->worker_waits, 1) < SFS_FS_WORKER_WAITS)
		return 1;
	atomic_fetch_sub(&fs->worker_waits, 1);
	return 0;
}

static void worker_done(struct sfs_fs *fs)
{
	atomic_fetch_sub(&fs->worker_waits, 1);
}

/* An open handed to an open thread (fs->openq): its close-to-open
 * question may wait on a stalled source (open_node). */
struct open_job {
	struct sfs_readq_job job;
	fuse_req_t req;
	struct sfs_fs *fs;
	fuse_ino_t ino;
	struct fuse_file_info fi; /* a copy of the request's */
};

static void run_open(struct sfs_readq_job *job, int stopping)
{
	struct open_job *j = (struct open_job *)job;

	if (stopping) /* the mount is going */
		fuse_reply_err(j->req, EIO);
	else
		open_node(j->req, j->fs, j->ino, &j->fi, 1);
	free(j);
}

static void op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	struct sfs_fs *fs = fs_of(req);

	if ((fi->flags & O_ACCMODE) != O_RDONLY) {
		fuse_reply_err(req, EROFS);
		return;
	}
	/* Close-to-open (open_node), not for the status file: it is the
	 * mount's, and it must answer while the seed does not. */
	pthread_rwlock_rdlock(fs->lock);
	const struct sfs_node *n = sfs_tree_get(fs->tree, ino);
	int status = n && (n->kind == SFS_NODE_STATUS ||
			   n->kind == SFS_NODE_METRICS);
	pthread_rwlock_unlock(fs->lock);
	if (status || !fs->openq) {
		open_node(req, fs, ino, fi, !status);
		return;
	}
	/* Here while fewer than SFS_FS_WORKER_WAITS operations that may
	 * wait run on workers, else on an open thread (never behind the
	 * reads queued for the read threads): opens waiting on a stalled
	 * source leave the workers free for the status file (the queue
	 * full or no memory: here). */
	if (worker_take(fs)) {
		open_node(req, fs, ino, fi, 1);
		worker_done(fs);
		return;
	}
	struct open_job *j = malloc(sizeof(*j));
	if (j) {
		*j = (struct open_job){.job.run = run_open,
				       .req = req,
				       .fs = fs,
				       .ino = ino,
				       .fi = *fi};
		if (!sfs_readq_push(fs->openq, &j->job))
			return;
		free(j);
	}
	open_node(req, fs, ino, fi, 1);
}

static void read_file(fuse_req_t req, struct sfs_fs *fs, struct open_file *h,
		      size_t size, off_t off)
{
	struct sfs_rvec v;

	SFS_LOG(SFS_DEBUG, "fs", "read %s [%jd, +%zu)", h->path, (intmax_t)off,
		size);
	sfs_rvec_init(&v);
	int rc = sfs_replica_read(fs->r, &h->rf, (uint64_t)off, size, &v);
	if (rc == -ESTALE) {
		/* The seed stopped serving this generation. */
		fuse_reply_err(req, ESTALE);
	} else if (rc) {
		SFS_LOG(SFS_WARN, "fs", "read %s [%jd, +%zu): %s", h->path,
			(intmax_t)off, size,
			rc == -EBADMSG ? "bytes do not match the seed's "
					 "checksum (refused)"
			: rc == -ESHUTDOWN && atomic_load(&fs->stopping)
				? "the mount is stopping"
				: strerror(-rc));
		/* Whatever went wrong below, the reader sees an I/O error;
		 * the cause is in the log above. */
		fuse_reply_err(req, rc == -ENOMEM ? ENOMEM : EIO);
	} else {
		fuse_reply_iov(req, v.iov, (int)v.n);
	}
	sfs_rvec_release(fs->r, &v);
}

/* A read holds its handle until its reply is out. */
static void hold(struct open_file *h)
{
	pthread_mutex_lock(&h->lock);
	h->inflight++;
	pthread_mutex_unlock(&h->lock);
}

static void drop(struct sfs_fs *fs, struct open_file *h)
{
	pthread_mutex_lock(&h->lock);
	int last = --h->inflight == 0 && h->released;
	pthread_mutex_unlock(&h->lock);
	if (last)
		open_file_free(fs, h);
}

static void reply_read(fuse_req_t req, struct sfs_fs *fs, struct open_file *h,
		       size_t size, off_t off)
{
	if (off < 0 || (uint64_t)off >= h->size || size == 0) {
		fuse_reply_buf(req, NULL, 0);
		return;
	}
	size_t n = (size_t)SFS_MIN((uint64_t)size, h->size - (uint64_t)off);
	if (h->kind == SFS_NODE_STATUS || h->kind == SFS_NODE_METRICS ||
	    h->kind == SFS_NODE_TJSON)
		fuse_reply_buf(req, h->text + off, n);
	else if (h->kind == SFS_NODE_BLOB)
		fuse_reply_buf(req, (const char *)h->blob + off, n);
	else
		read_file(req, fs, h, size, off);
}

/* A read handed to the mount's read threads (readq.h); it holds its
 * handle (hold) until answered. */
struct read_job {
	struct sfs_readq_job job;
	fuse_req_t req;
	struct sfs_fs *fs;
	struct open_file *h;
	size_t size;
	off_t off;
};

static void run_read(struct sfs_readq_job *job, int stopping)
{
	struct read_job *j = (struct read_job *)job;

	if (stopping) /* the mount is going: an error, never bytes */
		fuse_reply_err(j->req, EIO);
	else
		reply_read(j->req, j->fs, j->h, j->size, j->off);
	drop(j->fs, j->h);
	free(j);
}

/* A read of @h's bytes from the cache or a source, which may wait for
 * one: even bytes in the cache now may be gone when the read pins them
 * (its own read-ahead may take their slots).  The generated files'
 * bytes are in memory. */
static int may_wait(const struct open_file *h, size_t size, off_t off)
{
	if (h->kind != SFS_NODE_FILE && h->kind != SFS_NODE_TENSOR)
		return 0;
	return off >= 0 && (uint64_t)off < h->size && size > 0;
}

/* Are the bytes a read of @size at @off in @h would answer all in
 * memory now (the cache's, or inline)?  For a read may_wait passed. */
static int resident(struct sfs_fs *fs, struct open_file *h, size_t size,
		    off_t off)
{
	uint64_t n = SFS_MIN((uint64_t)size, h->size - (uint64_t)off);
	return sfs_replica_resident(fs->r, &h->rf, (uint64_t)off, n) == n;
}

static void op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		    struct fuse_file_info *fi)
{
	struct sfs_fs *fs = fs_of(req);
	struct open_file *h = (struct open_file *)(uintptr_t)fi->fh;

	if (!h) {
		fuse_reply_err(req, EBADF);
		return;
	}
	SFS_TSAN_PLANT(); /* tsan_sees only: common/plant.h */
	hold(h);
	/* One that may wait runs here while fewer than SFS_FS_WORKER_WAITS
	 * operations that may wait do, else on a read thread: libfuse's
	 * workers stay free for the status file, lookups, listings and
	 * attributes however many reads wait on a stalled source.  The
	 * queue full (fs->readq's cap) or no thread: answered here. */
	if (fs->readq && may_wait(h, size, off)) {
		if (worker_take(fs)) {
			reply_read(req, fs, h, size, off);
			worker_done(fs);
			drop(fs, h);
			return;
		}
		/* Its bytes all in the cache now (an inline file's always
		 * are): here, never queued behind reads that wait. */
		struct read_job *j =
			resident(fs, h, size, off) ? NULL : malloc(sizeof(*j));
		if (j) {
			*j = (struct read_job){.job.run = run_read,
					       .req = req,
					       .fs = fs,
					       .h = h,
					       .size = size,
					       .off = off};
			if (!sfs_readq_push(fs->readq, &j->job))
				return;
			free(j);
		}
	}
	reply_read(req, fs, h, size, off);
	drop(fs, h);
}

static void op_release(fuse_req_t req, fuse_ino_t ino,
		       struct fuse_file_info *fi)
{
	struct open_file *h = (struct open_file *)(uintptr_t)fi->fh;
	pthread_mutex_lock(&h->lock);
	h->released = 1;
	int now = h->inflight == 0;
	pthread_mutex_unlock(&h->lock);
	if (now)
		open_file_free(fs_of(req), h);
	fuse_reply_err(req, 0);
}

static void op_statfs(fuse_req_t req, fuse_ino_t ino)
{
	const struct sfs_fs *fs = fs_of(req);
	struct statvfs sv;

	memset(&sv, 0, sizeof(sv));
	sv.f_bsize = 4096;
	sv.f_frsize = 4096;
	sv.f_blocks = (fsblkcnt_t)((fs->total_bytes + 4095) / 4096);
	pthread_rwlock_rdlock(fs->lock); /* the sweeper frees nodes */
	sv.f_files = fs->tree->n;
	pthread_rwlock_unlock(fs->lock);
	sv.f_namemax = 255;
	sv.f_flag = ST_RDONLY;
	fuse_reply_statfs(req, &sv);
}

/* The attributes of @ino come from its node's generation (held while
 * used: a new generation may replace the node meanwhile). */
static int xattr_of(struct sfs_fs *fs, fuse_ino_t ino, const char *name,
		    char **out, size_t *len)
{
	pthread_rwlock_rdlock(fs->lock);
	const struct sfs_node *n = sfs_tree_get(fs->tree, ino);
	struct sfs_view *v = NULL;
	const struct sfs_mtensor *t = NULL;
	const struct sfs_mfile *f = NULL;
	int rc = n ? 0 : -sfs_tree_gone_err(fs->tree, ino);
	if (n && (n->kind == SFS_NODE_FILE || n->kind == SFS_NODE_TENSOR ||
		  n->kind == SFS_NODE_TJSON)) {
		/* A replaced node's generation may be gone (no owner) or
		 * going: then its attributes are stale, like its bytes. */
		rc = sfs_replica_ref(fs->r, n->owner);
		if (!rc) {
			v = n->owner;
			t = n->tensor;
			f = n->file;
		}
	}
	pthread_rwlock_unlock(fs->lock);
	if (rc)
		return rc;
	if (!v)
		return name ? -ENODATA : 0;
	rc = name ? sfs_tview_xattr(v->m, t, f, fs->tree->seed, name, out, len)
		  : sfs_tview_xattr_list(v->m, t, f, fs->tree->seed, out, len);
	sfs_replica_unref(fs->r, v);
	return rc;
}

/* getxattr and listxattr answer alike: the size when asked with 0. */
static void reply_xattr(fuse_req_t req, size_t size, int rc, char *val,
			size_t len)
{
	if (rc)
		fuse_reply_err(req, -rc);
	else if (size == 0)
		fuse_reply_xattr(req, len);
	else if (size < len)
		fuse_reply_err(req, ERANGE);
	else
		fuse_reply_buf(req, val, len);
	free(val);
}

static void op_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name,
			size_t size)
{
	char *val = NULL;
	size_t len = 0;
	int rc = xattr_of(fs_of(req), ino, name, &val, &len);
	reply_xattr(req, size, rc, val, len);
}

static void op_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size)
{
	char *val = NULL;
	size_t len = 0;
	int rc = xattr_of(fs_of(req), ino, NULL, &val, &len);
	reply_xattr(req, size, rc, val, len);
}

void sfs_fs_release_all(struct sfs_fs *fs)
{
	for (;;) {
		pthread_mutex_lock(&fs->handles_lock);
		struct open_file *h = fs->handles;
		pthread_mutex_unlock(&fs->handles_lock);
		if (!h)
			break;
		open_file_free(fs, h);
	}
}

const struct fuse_lowlevel_ops sfs_fs_ops = {
	.getxattr = op_getxattr,
	.listxattr = op_listxattr,
	.init = op_init,
	.lookup = op_lookup,
	.getattr = op_getattr,
	.opendir = op_opendir,
	.readdir = op_readdir,
	.open = op_open,
	.read = op_read,
	.release = op_release,
	.statfs = op_statfs,
};
