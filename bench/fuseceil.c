/* SPDX-License-Identifier: MIT */
/*
 * fuseceil.c - the FUSE ceiling of make bench: a minimal low-level FUSE
 * server that serves a copy of a directory from RAM, with the mount's
 * options (multithreaded loop, async reads, max_background 32; the bench
 * sets the same read_ahead_kb), so nothing but FUSE and the kernel is in
 * a read's path; its memory is of the kind the mount's cache serves
 * from (2 MiB aligned, huge pages).  What it reads is what any FUSE file
 * system can read on this machine at most.
 *
 *   sfs-fuseceil DIR MOUNTPOINT [-o direct_io] [FUSE options]
 *
 * Runs in the foreground until unmounted.  Read-only; every file of DIR
 * (and its subdirectories) is read into memory first.
 */
#define FUSE_USE_VERSION 314
#include <fuse_lowlevel.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

struct node {
	char *name;
	size_t parent; /* inode - 1 of the parent */
	int dir;
	char *data;
	size_t size;
};

static struct node *nodes;
static size_t nnodes, cap;
static int direct_io;

static size_t add(const char *name, size_t parent, int dir)
{
	if (nnodes == cap) {
		cap = cap ? 2 * cap : 64;
		nodes = realloc(nodes, cap * sizeof(*nodes));
		if (!nodes) {
			perror("sfs-fuseceil");
			exit(1);
		}
	}
	nodes[nnodes] = (struct node){
		.name = strdup(name), .parent = parent, .dir = dir};
	return nnodes++;
}

/* Memory of the kind the mount's cache serves from (cache/slab.c): 2 MiB
 * aligned, in transparent huge pages where the kernel allows.  With THP
 * in "madvise" mode, malloc's 4 KiB pages made each reply's copy pin
 * 512 times as many source pages as the mount's, and the ceiling read
 * slower than the mount it bounds.  Kept until exit; NULL on failure. */
static char *slab_like(size_t len)
{
	const size_t huge = 2u << 20;
	size_t map = (len ? len : 1) + huge;
	uint8_t *p = mmap(NULL, map, PROT_READ | PROT_WRITE,
			  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return NULL;
	uint8_t *a =
		(uint8_t *)(((uintptr_t)p + huge - 1) & ~(uintptr_t)(huge - 1));
	madvise(a, len ? len : 1, MADV_HUGEPAGE);
	return (char *)a;
}

static void load(const char *path, size_t self)
{
	DIR *d = opendir(path);
	struct dirent *e;
	char p[4096];
	if (!d) {
		perror(path);
		exit(1);
	}
	while ((e = readdir(d))) {
		struct stat st;
		if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
			continue;
		snprintf(p, sizeof(p), "%s/%s", path, e->d_name);
		if (stat(p, &st))
			continue;
		if (S_ISDIR(st.st_mode)) {
			load(p, add(e->d_name, self, 1));
			continue;
		}
		if (!S_ISREG(st.st_mode))
			continue;
		size_t i = add(e->d_name, self, 0);
		int fd = open(p, O_RDONLY);
		char *buf = slab_like((size_t)st.st_size);
		size_t got = 0;
		while (fd >= 0 && buf && got < (size_t)st.st_size) {
			ssize_t n =
				read(fd, buf + got, (size_t)st.st_size - got);
			if (n <= 0)
				break;
			got += (size_t)n;
		}
		if (fd < 0 || !buf || got != (size_t)st.st_size) {
			fprintf(stderr, "sfs-fuseceil: cannot load %s\n", p);
			exit(1);
		}
		close(fd);
		nodes[i].data = buf;
		nodes[i].size = got;
	}
	closedir(d);
}

static struct node *get(fuse_ino_t ino)
{
	return ino >= 1 && ino <= nnodes ? &nodes[ino - 1] : NULL;
}

static void fill(fuse_ino_t ino, struct stat *st)
{
	const struct node *n = get(ino);
	memset(st, 0, sizeof(*st));
	st->st_ino = ino;
	st->st_mode = n->dir ? S_IFDIR | 0555 : S_IFREG | 0444;
	st->st_nlink = n->dir ? 2 : 1;
	st->st_size = (off_t)n->size;
}

static void op_init(void *ud, struct fuse_conn_info *conn)
{
	(void)ud;
	if (conn->capable & FUSE_CAP_ASYNC_READ)
		conn->want |= FUSE_CAP_ASYNC_READ;
	conn->max_background = 32;
}

static void op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
	for (size_t i = 1; i < nnodes; i++)
		if (nodes[i].parent == parent - 1 &&
		    !strcmp(nodes[i].name, name)) {
			struct fuse_entry_param e = {.ino = i + 1,
						     .attr_timeout = 3600,
						     .entry_timeout = 3600};
			fill(e.ino, &e.attr);
			fuse_reply_entry(req, &e);
			return;
		}
	fuse_reply_err(req, ENOENT);
}

static void op_getattr(fuse_req_t req, fuse_ino_t ino,
		       struct fuse_file_info *fi)
{
	struct stat st;
	(void)fi;
	if (!get(ino)) {
		fuse_reply_err(req, ENOENT);
		return;
	}
	fill(ino, &st);
	fuse_reply_attr(req, &st, 3600);
}

static void op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		       struct fuse_file_info *fi)
{
	char *buf = malloc(size);
	size_t used = 0;
	(void)fi;
	if (!buf) {
		fuse_reply_err(req, ENOMEM);
		return;
	}
	/* Entry k of the listing: its children, in inode order. */
	off_t k = 0;
	for (size_t i = 1; i < nnodes; i++) {
		if (nodes[i].parent != ino - 1 || k++ < off)
			continue;
		struct stat st;
		fill(i + 1, &st);
		size_t n = fuse_add_direntry(req, buf + used, size - used,
					     nodes[i].name, &st, k);
		if (n > size - used)
			break;
		used += n;
	}
	fuse_reply_buf(req, buf, used);
	free(buf);
}

static void op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
	const struct node *n = get(ino);
	if (!n || n->dir) {
		fuse_reply_err(req, n ? EISDIR : ENOENT);
		return;
	}
	fi->direct_io = direct_io;
	fi->keep_cache = !direct_io;
	fuse_reply_open(req, fi);
}

static void op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
		    struct fuse_file_info *fi)
{
	const struct node *n = get(ino);
	(void)fi;
	if ((size_t)off >= n->size) {
		fuse_reply_buf(req, NULL, 0);
		return;
	}
	if (size > n->size - (size_t)off)
		size = n->size - (size_t)off;
	fuse_reply_buf(req, n->data + off, size);
}

static const struct fuse_lowlevel_ops ops = {
	.init = op_init,
	.lookup = op_lookup,
	.getattr = op_getattr,
	.readdir = op_readdir,
	.open = op_open,
	.read = op_read,
};

int main(int argc, char **argv)
{
	struct fuse_args args = FUSE_ARGS_INIT(0, NULL);
	struct fuse_session *se;
	int rc = 1;

	if (argc < 3) {
		fprintf(stderr,
			"usage: sfs-fuseceil DIR MOUNTPOINT [-o direct_io]\n");
		return 2;
	}
	fuse_opt_add_arg(&args, argv[0]);
	for (int i = 3; i < argc; i++) {
		if (!strcmp(argv[i], "-o") && i + 1 < argc &&
		    !strcmp(argv[i + 1], "direct_io")) {
			direct_io = 1;
			i++;
			continue;
		}
		fuse_opt_add_arg(&args, argv[i]);
	}
	fuse_opt_add_arg(&args, "-oro,fsname=sfs-fuseceil");
	add("", 0, 1);
	load(argv[1], 0);
	se = fuse_session_new(&args, &ops, sizeof(ops), NULL);
	if (!se)
		goto out;
	if (fuse_session_mount(se, argv[2]))
		goto out_se;
	struct fuse_loop_config *lc = fuse_loop_cfg_create();
	rc = lc ? fuse_session_loop_mt(se, lc) : 1;
	fuse_loop_cfg_destroy(lc);
	fuse_session_unmount(se);
out_se:
	fuse_session_destroy(se);
out:
	fuse_opt_free_args(&args);
	return rc ? 1 : 0;
}
