/* SPDX-License-Identifier: MIT */
#include "fsops.h"

#include "cache/cache.h"
#include "common/log.h"
#include "common/util.h"
#include "fs/readahead.h"
#include "fs/tree.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>

#define READ_IOV_STACK 32

struct status_buf {
	char *text;
	size_t len;
};

/* An open model file: its read-ahead state. */
struct open_file {
	pthread_mutex_t lock;
	struct sfs_ra ra; /* protected by lock */
};

static struct sfs_fs *fs_of(fuse_req_t req)
{
	return fuse_req_userdata(req);
}

static void fill_attr(const struct sfs_fs *fs, uint64_t ino,
		      const struct sfs_node *n, struct stat *st)
{
	memset(st, 0, sizeof(*st));
	st->st_ino = ino;
	st->st_uid = fs->uid;
	st->st_gid = fs->gid;
	st->st_atim = st->st_mtim = st->st_ctim = fs->mtime;
	st->st_blksize = 1 << 20;
	if (n->kind == SFS_NODE_DIR) {
		st->st_mode = S_IFDIR | 0555;
		st->st_nlink = 2;
		st->st_size = 4096;
	} else {
		st->st_mode = S_IFREG | 0444;
		st->st_nlink = 1;
		st->st_size = (off_t)n->size;
		st->st_blocks = (blkcnt_t)((n->size + 511) / 512);
	}
}

static void op_init(void *userdata, struct fuse_conn_info *conn)
{
	struct sfs_fs *fs = userdata;

	/* Reads may be answered out of order: the kernel's read-ahead
	 * keeps several requests in flight. */
	if (conn->capable & FUSE_CAP_ASYNC_READ)
		conn->want |= FUSE_CAP_ASYNC_READ;
	/* Files never change within a generation. */
	conn->want &= ~FUSE_CAP_AUTO_INVAL_DATA;
	if (fs->max_background)
		conn->max_background = fs->max_background;
	SFS_LOG(SFS_DEBUG, "fs",
		"init: proto %u.%u max_readahead %u "
		"max_read %u",
		conn->proto_major, conn->proto_minor, conn->max_readahead,
		conn->max_read);
}

static void op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	struct sfs_fs *fs = fs_of(req);
	uint64_t ino = sfs_tree_lookup(fs->tree, parent, name);
	struct fuse_entry_param e;

	if (!ino) {
		/* Negative entries may be cached as long as positive ones. */
		memset(&e, 0, sizeof(e));
		e.entry_timeout = fs->entry_timeout;
		fuse_reply_entry(req, &e);
		return;
	}
	memset(&e, 0, sizeof(e));
	e.ino = ino;
	e.generation = 1;
	e.attr_timeout = fs->entry_timeout;
	e.entry_timeout = fs->entry_timeout;
	fill_attr(fs, ino, sfs_tree_get(fs->tree, ino), &e.attr);
	fuse_reply_entry(req, &e);
}

static void op_getattr(fuse_req_t req, fuse_ino_t ino,
		       struct fuse_file_info *fi)
{
	struct sfs_fs *fs = fs_of(req);
	const struct sfs_node *n = sfs_tree_get(fs->tree, ino);
	struct stat st;

	if (!n) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	fill_attr(fs, ino, n, &st);
	fuse_reply_attr(req, &st, fs->entry_timeout);
}

static void op_opendir(fuse_req_t req, fuse_ino_t ino,
		       struct fuse_file_info *fi)
{
	const struct sfs_node *n = sfs_tree_get(fs_of(req)->tree, ino);

	if (!n)
		fuse_reply_err(req, ENOENT);
	else if (n->kind != SFS_NODE_DIR)
		fuse_reply_err(req, ENOTDIR);
	else {
		fi->cache_readdir = 1;
		fi->keep_cache = 1;
		fuse_reply_open(req, fi);
	}
}

static void op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		       struct fuse_file_info *fi)
{
	struct sfs_fs *fs = fs_of(req);
	const struct sfs_node *n = sfs_tree_get(fs->tree, ino);
	size_t used = 0;
	char *buf;

	if (!n || n->kind != SFS_NODE_DIR) {
		fuse_reply_err(req, ENOTDIR);
		return;
	}
	if (!(buf = malloc(size))) {
		fuse_reply_err(req, ENOMEM);
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
	fuse_reply_buf(req, buf, used);
	free(buf);
}

static void op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	const struct sfs_node *n = sfs_tree_get(fs_of(req)->tree, ino);

	if (!n) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	if (n->kind == SFS_NODE_DIR) {
		fuse_reply_err(req, EISDIR);
		return;
	}
	if ((fi->flags & O_ACCMODE) != O_RDONLY) {
		fuse_reply_err(req, EROFS);
		return;
	}
	if (n->kind == SFS_NODE_STATUS) {
		/* A snapshot per open, read to EOF whatever stat says. */
		struct sfs_fs *fs = fs_of(req);
		struct status_buf *b = calloc(1, sizeof(*b));
		int rc = b && fs->status
				 ? fs->status(fs->status_arg, &b->text, &b->len)
				 : -ENOMEM;
		if (rc) {
			free(b);
			fuse_reply_err(req, -rc);
			return;
		}
		fi->fh = (uint64_t)(uintptr_t)b;
		fi->direct_io = 1;
		fuse_reply_open(req, fi);
		return;
	}
	if (n->kind == SFS_NODE_FILE) {
		struct open_file *h = calloc(1, sizeof(*h));
		if (!h) {
			fuse_reply_err(req, ENOMEM);
			return;
		}
		pthread_mutex_init(&h->lock, NULL);
		fi->fh = (uint64_t)(uintptr_t)h;
	}
	/* One generation never changes: keep the page cache across opens. */
	fi->keep_cache = 1;
	fi->noflush = 1;
	fuse_reply_open(req, fi);
}

struct read_ctx {
	struct iovec *iov;
	struct sfs_chunk **pins;
	size_t n, cap;
	struct iovec iov_stack[READ_IOV_STACK];
	struct sfs_chunk *pins_stack[READ_IOV_STACK];
};

static int ctx_push(struct read_ctx *r, const void *p, size_t len,
		    struct sfs_chunk *pin)
{
	if (r->n == r->cap) {
		size_t cap = r->cap * 2;
		struct iovec *iov = malloc(cap * sizeof(*iov));
		struct sfs_chunk **pins = malloc(cap * sizeof(*pins));
		if (!iov || !pins) {
			free(iov);
			free(pins);
			return -ENOMEM;
		}
		memcpy(iov, r->iov, r->n * sizeof(*iov));
		memcpy(pins, r->pins, r->n * sizeof(*pins));
		if (r->iov != r->iov_stack) {
			free(r->iov);
			free(r->pins);
		}
		r->iov = iov;
		r->pins = pins;
		r->cap = cap;
	}
	r->iov[r->n].iov_base = (void *)p;
	r->iov[r->n].iov_len = len;
	r->pins[r->n] = pin;
	r->n++;
	return 0;
}

static void ctx_release(struct sfs_cache *c, struct read_ctx *r)
{
	for (size_t i = 0; i < r->n; i++)
		sfs_cache_put(c, r->pins[i]);
	if (r->iov != r->iov_stack) {
		free(r->iov);
		free(r->pins);
	}
}

/* Start the pulls of the bytes [off, end) of @n; wait for none. */
static void pull_range(struct sfs_fs *fs, const struct sfs_node *n,
		       uint64_t off, uint64_t end)
{
	const struct sfs_mfile *f = n->file;
	ssize_t first = sfs_mfile_find_extent(f, off);

	for (size_t i = (size_t)first;
	     first >= 0 && i < f->next && f->ext[i].off < end; i++) {
		const struct sfs_extent *e = &f->ext[i];
		if (e->kind != SFS_EXT_REGION)
			continue;
		uint64_t a = SFS_MAX(off, e->off);
		uint64_t b = SFS_MIN(end, e->off + e->len);
		sfs_cache_prefetch(fs->cache, n->src, e->region,
				   e->roff + (a - e->off), b - a);
	}
}

/* Pin the bytes [off, end) of @n, extent by extent, into @r. */
static int gather(struct sfs_fs *fs, const struct sfs_node *n, uint64_t off,
		  uint64_t end, struct read_ctx *r)
{
	const struct sfs_mfile *f = n->file;
	ssize_t first = sfs_mfile_find_extent(f, off);
	int rc = 0;

	for (size_t i = (size_t)first;
	     i < f->next && f->ext[i].off < end && !rc; i++) {
		const struct sfs_extent *e = &f->ext[i];
		uint64_t a = SFS_MAX(off, e->off);
		uint64_t b = SFS_MIN(end, e->off + e->len);
		if (e->kind == SFS_EXT_INLINE) {
			rc = ctx_push(r, e->data + (a - e->off), b - a, NULL);
			continue;
		}
		while (a < b && !rc) {
			struct sfs_chunk *ch;
			const uint8_t *p;
			size_t avail;
			rc = sfs_cache_get(fs->cache, n->src, e->region,
					   e->roff + (a - e->off), &ch, &p,
					   &avail);
			if (rc)
				break;
			size_t take = (size_t)SFS_MIN((uint64_t)avail, b - a);
			rc = ctx_push(r, p, take, ch);
			if (rc)
				sfs_cache_put(fs->cache, ch);
			a += take;
		}
	}
	return rc;
}

static void op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		    struct fuse_file_info *fi)
{
	struct sfs_fs *fs = fs_of(req);
	const struct sfs_node *n = sfs_tree_get(fs->tree, ino);
	struct read_ctx r;
	int rc;

	if (!n || n->kind == SFS_NODE_DIR) {
		fuse_reply_err(req, n ? EISDIR : ENOENT);
		return;
	}
	if (n->kind == SFS_NODE_STATUS) {
		struct status_buf *b = (struct status_buf *)(uintptr_t)fi->fh;
		size_t o =
			off >= 0 && (size_t)off < b->len ? (size_t)off : b->len;
		fuse_reply_buf(req, b->text + o, SFS_MIN(size, b->len - o));
		return;
	}
	if (off < 0 || (uint64_t)off >= n->size || size == 0) {
		fuse_reply_buf(req, NULL, 0);
		return;
	}
	SFS_LOG(SFS_DEBUG, "fs", "read %s [%jd, +%zu)", n->path, (intmax_t)off,
		size);
	uint64_t end = SFS_MIN(n->size, (uint64_t)off + size);
	if (n->kind == SFS_NODE_BLOB) {
		fuse_reply_buf(req, (const char *)n->blob + off,
			       (size_t)(end - (uint64_t)off));
		return;
	}
	r.iov = r.iov_stack;
	r.pins = r.pins_stack;
	r.n = 0;
	r.cap = READ_IOV_STACK;
	/* Start every pull this read needs, then those of the read-ahead
	 * window, before waiting for any. */
	pull_range(fs, n, (uint64_t)off, end);
	struct open_file *h = (struct open_file *)(uintptr_t)fi->fh;
	if (h && fs->ra_max) {
		uint64_t a, b;
		pthread_mutex_lock(&h->lock);
		sfs_ra_step(&h->ra, (uint64_t)off, end, n->size, fs->ra_min,
			    fs->ra_max, &a, &b);
		pthread_mutex_unlock(&h->lock);
		if (a < b)
			pull_range(fs, n, a, b);
	}
	rc = gather(fs, n, (uint64_t)off, end, &r);
	if (rc) {
		SFS_LOG(SFS_WARN, "fs", "read %s [%jd, +%zu): %s", n->path,
			(intmax_t)off, size,
			rc == -EBADMSG
				? "bytes do not match the seed's checksum "
				  "(refused)"
				: strerror(-rc));
		/* Whatever went wrong below, the reader sees an I/O error;
		 * the cause is in the log above. */
		fuse_reply_err(req, rc == -ENOMEM ? ENOMEM : EIO);
	} else {
		fuse_reply_iov(req, r.iov, (int)r.n);
	}
	ctx_release(fs->cache, &r);
}

static void op_release(fuse_req_t req, fuse_ino_t ino,
		       struct fuse_file_info *fi)
{
	const struct sfs_node *n = sfs_tree_get(fs_of(req)->tree, ino);
	if (n && n->kind == SFS_NODE_STATUS && fi->fh) {
		struct status_buf *b = (struct status_buf *)(uintptr_t)fi->fh;
		free(b->text);
		free(b);
	} else if (n && n->kind == SFS_NODE_FILE && fi->fh) {
		struct open_file *h = (struct open_file *)(uintptr_t)fi->fh;
		pthread_mutex_destroy(&h->lock);
		free(h);
	}
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
	sv.f_files = fs->tree->n;
	sv.f_namemax = 255;
	sv.f_flag = ST_RDONLY;
	fuse_reply_statfs(req, &sv);
}

const struct fuse_lowlevel_ops sfs_fs_ops = {
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
