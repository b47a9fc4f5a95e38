/* SPDX-License-Identifier: MIT */
/*
 * fakeseedfs.c - a FUSE filesystem of type fuse.seedfs that is no seedfs
 * mount: it shows the files of a directory, read-only, and anything can
 * be there (a .seedfs/status that names any seeds, token file and
 * control socket).  What any user can mount with -o subtype=seedfs;
 * seedfs.safe_open must not believe it (tests/integration/safeopen.sh).
 *
 *   fakeseedfs DIR MNT UID
 *
 * Mounts MNT (allow_other: other users may look) as UID: the kernel
 * records UID as the mount's owner (user_id), as fusermount does for a
 * user, and the daemon then serves as UID alone.  Started by root (it
 * mounts directly).  Runs in the foreground; prints "mounted" once the
 * mount is there; unmount (fusermount3 -u) or SIGTERM ends it.
 */
#define FUSE_USE_VERSION 314
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* setresuid */
#endif
#include <fuse.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int dirfd_; /* DIR, opened before the daemon drops to UID */

static const char *rel(const char *path)
{
	return path[1] ? path + 1 : ".";
}

static int fs_getattr(const char *path, struct stat *st,
		      struct fuse_file_info *fi)
{
	(void)fi;
	return fstatat(dirfd_, rel(path), st, AT_SYMLINK_NOFOLLOW) ? -errno : 0;
}

static int fs_readdir(const char *path, void *buf, fuse_fill_dir_t fill,
		      off_t off, struct fuse_file_info *fi,
		      enum fuse_readdir_flags flags)
{
	(void)off;
	(void)fi;
	(void)flags;
	int fd = openat(dirfd_, rel(path), O_RDONLY | O_DIRECTORY);
	if (fd < 0)
		return -errno;
	DIR *d = fdopendir(fd);
	if (!d) {
		close(fd);
		return -errno;
	}
	struct dirent *e;
	while ((e = readdir(d)))
		if (fill(buf, e->d_name, NULL, 0, 0))
			break;
	closedir(d);
	return 0;
}

static int fs_open(const char *path, struct fuse_file_info *fi)
{
	if ((fi->flags & O_ACCMODE) != O_RDONLY)
		return -EROFS;
	int fd = openat(dirfd_, rel(path), O_RDONLY);
	if (fd < 0)
		return -errno;
	fi->fh = (uint64_t)fd;
	return 0;
}

static int fs_read(const char *path, char *buf, size_t len, off_t off,
		   struct fuse_file_info *fi)
{
	(void)path;
	ssize_t n = pread((int)fi->fh, buf, len, off);
	return n < 0 ? -errno : (int)n;
}

static int fs_release(const char *path, struct fuse_file_info *fi)
{
	(void)path;
	close((int)fi->fh);
	return 0;
}

static const struct fuse_operations ops = {
	.getattr = fs_getattr,
	.readdir = fs_readdir,
	.open = fs_open,
	.read = fs_read,
	.release = fs_release,
};

int main(int argc, char **argv)
{
	if (argc != 4) {
		fprintf(stderr, "usage: fakeseedfs DIR MNT UID\n");
		return 2;
	}
	uid_t uid = (uid_t)strtoul(argv[3], NULL, 10);
	if ((dirfd_ = open(argv[1], O_RDONLY | O_DIRECTORY)) < 0) {
		perror(argv[1]);
		return 1;
	}
	char *fargv[] = {argv[0], "-o",
			 "ro,allow_other,subtype=seedfs,fsname=fakeseedfs",
			 NULL};
	struct fuse_args args = FUSE_ARGS_INIT(3, fargv);
	struct fuse *f = fuse_new(&args, &ops, sizeof(ops), NULL);
	if (!f)
		return 1;
	/* libfuse records getuid() and getgid() as the mount's owner: those
	 * become UID's while the effective ids stay root's to mount. */
	if (setresgid(uid, 0, 0) || setresuid(uid, 0, 0)) {
		perror("setresuid");
		return 1;
	}
	if (fuse_mount(f, argv[2])) {
		fuse_destroy(f);
		return 1;
	}
	if (setgroups(0, NULL) || setresgid(uid, uid, uid) ||
	    setresuid(uid, uid, uid)) {
		perror("dropping to UID");
		fuse_unmount(f);
		fuse_destroy(f);
		return 1;
	}
	if (fuse_set_signal_handlers(fuse_get_session(f))) {
		fuse_unmount(f);
		fuse_destroy(f);
		return 1;
	}
	printf("mounted\n");
	fflush(stdout);
	int rc = fuse_loop(f);
	fuse_remove_signal_handlers(fuse_get_session(f));
	fuse_unmount(f);
	fuse_destroy(f);
	return rc ? 1 : 0;
}
