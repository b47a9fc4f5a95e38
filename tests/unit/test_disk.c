/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of the disk tier on a real directory: bytes round trip,
 * holes and short files are misses, one user per directory, a directory
 * whose key does not match is started afresh, and the bound removes the
 * least recently used other source, never one in use; links, hard links
 * and other users' directories in it are never followed, written
 * through or emptied, and the directory itself is checked.
 */
#include "bound.h"
#include "check_run.h"

#include "cache/disk.h"

#include <check.h>
#include <errno.h>
#include <pthread.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define KB 1024u

static char dir[64];
static char err[256];

static void setup(void)
{
	snprintf(dir, sizeof(dir), "/tmp/seedfs-disk.XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(dir));
}

static void teardown(void)
{
	char cmd[128];
	snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
	ck_assert_int_eq(system(cmd), 0);
}

static int count_dirs(void)
{
	char cmd[160];
	for (int n = 0; n < 10; n++) {
		snprintf(cmd, sizeof(cmd),
			 "test $(find %s -mindepth 1 -maxdepth 1 -type d | "
			 "wc -l) -eq %d",
			 dir, n);
		if (system(cmd) == 0)
			return n;
	}
	return -1;
}

/* Open descriptors of this process on files that were deleted. */
static int deleted_fds(void)
{
	char path[64], target[512];
	int n = 0;
	for (int fd = 0; fd < 1024; fd++) {
		snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
		ssize_t k = readlink(path, target, sizeof(target) - 1);
		if (k <= 0)
			continue;
		target[k] = '\0';
		n += strstr(target, dir) && strstr(target, "(deleted)");
	}
	return n;
}

/* Bytes the directory's files hold on disk. */
static uint64_t du(void)
{
	char cmd[160], buf[64] = "";
	snprintf(cmd, sizeof(cmd), "du -s -B1 %s | cut -f1", dir);
	FILE *f = popen(cmd, "r");
	ck_assert_ptr_nonnull(f);
	ck_assert_ptr_nonnull(fgets(buf, sizeof(buf), f));
	pclose(f);
	return strtoull(buf, NULL, 10);
}

/* A dropped source's files are closed: their space goes back, and
 * descriptors do not pile up generation after generation. */
START_TEST(drop_frees_space)
{
	struct sfs_disk *d;
	static char in[256 * KB];
	memset(in, 5, sizeof(in));
	ck_assert_int_eq(sfs_disk_open(dir, 0, &d, err, sizeof(err)), 0);
	for (int g = 0; g < 8; g++) {
		struct sfs_disk_src *s;
		char key[32];
		snprintf(key, sizeof(key), "generation %d", g);
		ck_assert_int_eq(sfs_disk_attach(d, key, "x", 2, &s), 0);
		ck_assert_int_eq(sfs_disk_write(s, 0, 0, in, sizeof(in)), 0);
		ck_assert_int_eq(sfs_disk_write(s, 1, 0, in, sizeof(in)), 0);
		sfs_disk_drop(s);
		ck_assert_int_eq(deleted_fds(), 0);
	}
	uint64_t used, max;
	sfs_disk_usage(d, &used, &max);
	ck_assert_uint_eq(used, 0);
	ck_assert_uint_le(du(), 64 * KB); /* the directory itself, the lock */
	sfs_disk_close(d);
}
END_TEST

struct racer {
	struct sfs_disk *d;
	struct sfs_disk_src *s;
	int stop;
};

static void *writer(void *arg)
{
	struct racer *r = arg;
	static char in[64 * KB];
	memset(in, 9, sizeof(in));
	for (uint64_t off = 0; !__atomic_load_n(&r->stop, __ATOMIC_ACQUIRE);
	     off = (off + sizeof(in)) % (4096 * KB))
		sfs_disk_write(__atomic_load_n(&r->s, __ATOMIC_ACQUIRE), 0, off,
			       in, sizeof(in));
	return NULL;
}

/* Writes racing drops: the byte count stays what the disk holds. */
START_TEST(count_survives_drops)
{
	struct racer r = {0};
	ck_assert_int_eq(sfs_disk_open(dir, 0, &r.d, err, sizeof(err)), 0);
	ck_assert_int_eq(sfs_disk_attach(r.d, "g0", "x", 1, &r.s), 0);
	pthread_t t;
	ck_assert_int_eq(pthread_create(&t, NULL, writer, &r), 0);
	for (int g = 1; g < 200; g++) {
		struct sfs_disk_src *next, *old = r.s;
		char key[32];
		snprintf(key, sizeof(key), "g%d", g);
		ck_assert_int_eq(sfs_disk_attach(r.d, key, "x", 1, &next), 0);
		__atomic_store_n(&r.s, next, __ATOMIC_RELEASE);
		usleep(500);
		sfs_disk_drop(old);
	}
	__atomic_store_n(&r.stop, 1, __ATOMIC_RELEASE);
	pthread_join(t, NULL);
	sfs_disk_drop(r.s);
	uint64_t used, max;
	sfs_disk_usage(r.d, &used, &max);
	ck_assert_uint_eq(used, 0);
	ck_assert_int_eq(deleted_fds(), 0);
	sfs_disk_close(r.d);
}
END_TEST

START_TEST(released_sources_freed)
{
	struct sfs_disk *d;
	static char in[4 * KB];
	memset(in, 7, sizeof(in));
	ck_assert_int_eq(sfs_disk_open(dir, 0, &d, err, sizeof(err)), 0);
	/* Generation after generation of one key, and of a new one: each
	 * released, none kept. */
	for (int g = 0; g < 20; g++) {
		char key[32];
		struct sfs_disk_src *s, *again;
		snprintf(key, sizeof(key), "g%d", g);
		ck_assert_int_eq(sfs_disk_attach(d, key, "x", 2, &s), 0);
		ck_assert_int_eq(sfs_disk_write(s, 1, 0, in, sizeof(in)), 0);
		ck_assert_uint_eq(sfs_disk_sources(d), 1);
		sfs_disk_release(s);
		ck_assert_uint_eq(sfs_disk_sources(d), 0);
		ck_assert_int_eq(count_dirs(), 0);
		/* The same key again starts afresh. */
		ck_assert_int_eq(sfs_disk_attach(d, key, "x", 2, &again), 0);
		ck_assert_int_eq(sfs_disk_read(again, 1, 0, in, 1), -ENOENT);
		sfs_disk_drop(again);
		sfs_disk_release(again); /* dropped first: fine */
	}
	ck_assert_uint_eq(sfs_disk_sources(d), 0);
	ck_assert_int_eq(deleted_fds(), 0);
	sfs_disk_release(NULL);
	sfs_disk_close(d);
}
END_TEST

START_TEST(round_trip_and_misses)
{
	struct sfs_disk *d;
	struct sfs_disk_src *s;
	static char in[64 * KB], out[64 * KB];
	for (size_t i = 0; i < sizeof(in); i++)
		in[i] = (char)(i * 7);

	ck_assert_int_eq(sfs_disk_open(dir, 0, &d, err, sizeof(err)), 0);
	ck_assert_int_eq(sfs_disk_attach(d, "k1", "about k1", 2, &s), 0);
	/* Nothing stored: no file at all. */
	ck_assert_int_eq(sfs_disk_read(s, 0, 0, out, sizeof(out)), -ENOENT);
	ck_assert_int_eq(sfs_disk_write(s, 0, 128 * KB, in, sizeof(in)), 0);
	memset(out, 0, sizeof(out));
	ck_assert_int_eq(sfs_disk_read(s, 0, 128 * KB, out, sizeof(out)), 0);
	ck_assert_int_eq(memcmp(in, out, sizeof(in)), 0);
	/* Past the end: short.  A hole reads as zeros (the cache's checksum
	 * check turns that into a miss). */
	ck_assert_int_eq(sfs_disk_read(s, 0, 160 * KB, out, sizeof(out)),
			 -ENODATA);
	ck_assert_int_eq(sfs_disk_read(s, 0, 0, out, sizeof(out)), 0);
	ck_assert_int_eq(out[0] | out[sizeof(out) - 1], 0);
	/* Regions beyond the source's are refused. */
	ck_assert_int_eq(sfs_disk_write(s, 2, 0, in, 1), -EINVAL);
	uint64_t used, max;
	sfs_disk_usage(d, &used, &max);
	ck_assert_uint_ge(used, 64 * KB);
	ck_assert_uint_eq(max, 0);
	sfs_disk_close(d);

	/* Reopened: the same key finds the bytes. */
	ck_assert_int_eq(sfs_disk_open(dir, 0, &d, err, sizeof(err)), 0);
	sfs_disk_usage(d, &used, &max);
	ck_assert_uint_ge(used, 64 * KB);
	ck_assert_int_eq(sfs_disk_attach(d, "k1", "about k1", 2, &s), 0);
	ck_assert_int_eq(sfs_disk_read(s, 0, 128 * KB, out, sizeof(out)), 0);
	ck_assert_int_eq(memcmp(in, out, sizeof(in)), 0);
	/* Dropped: gone from the directory, later writes refused. */
	sfs_disk_drop(s);
	ck_assert_int_eq(count_dirs(), 0);
	ck_assert_int_eq(sfs_disk_write(s, 0, 0, in, 1), -ESTALE);
	sfs_disk_close(d);
}
END_TEST

START_TEST(one_user_per_directory)
{
	struct sfs_disk *a, *b;
	ck_assert_int_eq(sfs_disk_open(dir, 0, &a, err, sizeof(err)), 0);
	ck_assert_int_eq(sfs_disk_open(dir, 0, &b, err, sizeof(err)), -EBUSY);
	ck_assert_msg(strstr(err, "another seedfs mount uses it"), "%s", err);
	sfs_disk_close(a);
	ck_assert_int_eq(sfs_disk_open(dir, 0, &b, err, sizeof(err)), 0);
	sfs_disk_close(b);
	/* A path that cannot be a directory: one line naming it. */
	char file[80];
	snprintf(file, sizeof(file), "%s/lock/x", dir);
	ck_assert_int_lt(sfs_disk_open(file, 0, &a, err, sizeof(err)), 0);
	ck_assert_msg(strstr(err, file), "%s", err);
}
END_TEST

START_TEST(foreign_directory_started_afresh)
{
	struct sfs_disk *d;
	struct sfs_disk_src *s;
	char in[4 * KB], out[4 * KB];
	memset(in, 'x', sizeof(in));

	ck_assert_int_eq(sfs_disk_open(dir, 0, &d, err, sizeof(err)), 0);
	ck_assert_int_eq(sfs_disk_attach(d, "k1", "k1", 1, &s), 0);
	ck_assert_int_eq(sfs_disk_write(s, 0, 0, in, sizeof(in)), 0);
	sfs_disk_close(d);
	/* Someone rewrote its about file: the key no longer matches. */
	char cmd[200];
	snprintf(cmd, sizeof(cmd),
		 "for f in %s/*/about; do echo 'key: other' "
		 ">$f; done",
		 dir);
	ck_assert_int_eq(system(cmd), 0);
	ck_assert_int_eq(sfs_disk_open(dir, 0, &d, err, sizeof(err)), 0);
	ck_assert_int_eq(sfs_disk_attach(d, "k1", "k1", 1, &s), 0);
	ck_assert_int_eq(sfs_disk_read(s, 0, 0, out, sizeof(out)), -ENOENT);
	sfs_disk_close(d);
}
END_TEST

START_TEST(bound_removes_least_recently_used)
{
	struct sfs_disk *d;
	struct sfs_disk_src *s1, *s2, *s3;
	static char in[400 * KB];
	memset(in, 'y', sizeof(in));
	const uint64_t max = 1024 * KB;

	ck_assert_int_eq(sfs_disk_open(dir, max, &d, err, sizeof(err)), 0);
	ck_assert_int_eq(sfs_disk_attach(d, "old", "old", 1, &s1), 0);
	ck_assert_int_eq(sfs_disk_write(s1, 0, 0, in, sizeof(in)), 0);
	sfs_disk_close(d);
	sleep(1); /* mtimes a second apart */
	ck_assert_int_eq(sfs_disk_open(dir, max, &d, err, sizeof(err)), 0);
	ck_assert_int_eq(sfs_disk_attach(d, "mid", "mid", 1, &s2), 0);
	ck_assert_int_eq(sfs_disk_write(s2, 0, 0, in, sizeof(in)), 0);
	sfs_disk_close(d);
	ck_assert_int_eq(count_dirs(), 2);

	/* A third source needs room: "old" goes, "mid" stays. */
	ck_assert_int_eq(sfs_disk_open(dir, max, &d, err, sizeof(err)), 0);
	ck_assert_int_eq(sfs_disk_attach(d, "new", "new", 1, &s3), 0);
	ck_assert_int_eq(sfs_disk_write(s3, 0, 0, in, sizeof(in)), 0);
	ck_assert_int_eq(count_dirs(), 2);
	char out[16];
	ck_assert_int_eq(sfs_disk_attach(d, "mid", "mid", 1, &s2), 0);
	ck_assert_int_eq(sfs_disk_read(s2, 0, 0, out, sizeof(out)), 0);
	ck_assert_int_eq(out[0], 'y');
	/* Everything left is in use: nothing more is stored. */
	ck_assert_int_eq(sfs_disk_write(s3, 0, 400 * KB, in, sizeof(in)),
			 -ENOSPC);
	uint64_t used, m;
	sfs_disk_usage(d, &used, &m);
	/* Within the bound (1024 KiB), in KiB rounded up. */
	SFS_TEST_BOUND_LE("used_kib", max / KB, (used + KB - 1) / KB);
	sfs_disk_close(d);
}
END_TEST

/*
 * What others leave where the mount's directories go: a link to a
 * directory of someone's is removed by its name, never followed; another
 * user's directory is never counted, evicted or emptied; the bound is
 * kept by removing the mount's own old directory.
 */
START_TEST(eviction_never_follows_or_takes_others)
{
	struct sfs_disk *d;
	struct sfs_disk_src *s;
	static char in[400 * KB];
	char victim[64], path[160], cmd[400];
	const uint64_t max = 1024 * KB;
	struct stat st;
	memset(in, 'z', sizeof(in));

	ck_assert_int_eq(sfs_disk_open(dir, max, &d, err, sizeof(err)), 0);
	ck_assert_int_eq(sfs_disk_attach(d, "old", "old", 1, &s), 0);
	ck_assert_int_eq(sfs_disk_write(s, 0, 0, in, sizeof(in)), 0);
	sfs_disk_close(d);

	snprintf(victim, sizeof(victim), "/tmp/seedfs-victim.XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(victim));
	snprintf(cmd, sizeof(cmd),
		 "echo keep >%s/keep && ln -s %s "
		 "%s/aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
		 victim, victim, dir);
	ck_assert_int_eq(system(cmd), 0);
	int root = geteuid() == 0;
	if (root) {
		snprintf(cmd, sizeof(cmd),
			 "d=%s/bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb && mkdir $d && "
			 "head -c 600000 /dev/zero >$d/r0 && "
			 "chown -R 65534:65534 $d",
			 dir);
		ck_assert_int_eq(system(cmd), 0);
	}

	ck_assert_int_eq(sfs_disk_open(dir, max, &d, err, sizeof(err)), 0);
	snprintf(path, sizeof(path), "%s/aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
		 dir);
	ck_assert_int_eq(lstat(path, &st), -1); /* the link is gone */
	ck_assert_int_eq(sfs_disk_attach(d, "new", "new", 1, &s), 0);
	ck_assert_int_eq(sfs_disk_write(s, 0, 0, in, sizeof(in)), 0);
	ck_assert_int_eq(sfs_disk_write(s, 0, sizeof(in), in, sizeof(in)), 0);
	uint64_t used, m;
	sfs_disk_usage(d, &used, &m);
	ck_assert_uint_le(used, max);
	sfs_disk_close(d);
	/* "old" made room; the victim and the other user's are as they
	 * were. */
	ck_assert_int_eq(count_dirs(), 1 + root);
	snprintf(path, sizeof(path), "%s/keep", victim);
	ck_assert_int_eq(stat(path, &st), 0);
	ck_assert_int_eq(st.st_size, 5);
	if (root) {
		snprintf(path, sizeof(path),
			 "%s/bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb/r0", dir);
		ck_assert_int_eq(stat(path, &st), 0);
		ck_assert_int_eq(st.st_size, 600000);
		ck_assert_uint_eq(st.st_uid, 65534);
	}
	snprintf(cmd, sizeof(cmd), "rm -rf %s", victim);
	ck_assert_int_eq(system(cmd), 0);
}
END_TEST

/* Region files that are links or hard links are replaced, never read or
 * written through. */
START_TEST(region_links_replaced)
{
	struct sfs_disk *d;
	struct sfs_disk_src *s;
	char victim[64], cmd[600], out[4];
	struct stat st;

	ck_assert_int_eq(sfs_disk_open(dir, 0, &d, err, sizeof(err)), 0);
	ck_assert_int_eq(sfs_disk_attach(d, "k", "k", 2, &s), 0);
	sfs_disk_close(d);
	snprintf(victim, sizeof(victim), "/tmp/seedfs-victim.XXXXXX");
	ck_assert_ptr_nonnull(mkdtemp(victim));
	snprintf(cmd, sizeof(cmd),
		 "cd %s && printf abcd >%s/v0 && printf efgh >%s/v1 && "
		 "for s in */; do ln -s %s/v0 $s/r0 && ln %s/v1 $s/r1; done",
		 dir, victim, victim, victim, victim);
	ck_assert_int_eq(system(cmd), 0);
	ck_assert_int_eq(sfs_disk_open(dir, 0, &d, err, sizeof(err)), 0);
	ck_assert_int_eq(sfs_disk_attach(d, "k", "k", 2, &s), 0);
	ck_assert_int_eq(sfs_disk_read(s, 0, 0, out, sizeof(out)), -ENOENT);
	ck_assert_int_eq(sfs_disk_read(s, 1, 0, out, sizeof(out)), -ENOENT);
	ck_assert_int_eq(sfs_disk_write(s, 0, 0, "WXYZ", 4), 0);
	ck_assert_int_eq(sfs_disk_write(s, 1, 0, "WXYZ", 4), 0);
	ck_assert_int_eq(sfs_disk_read(s, 1, 0, out, sizeof(out)), 0);
	ck_assert_int_eq(memcmp(out, "WXYZ", 4), 0);
	sfs_disk_close(d);
	snprintf(cmd, sizeof(cmd),
		 "test \"$(cat %s/v0 %s/v1)\" = abcdefgh && "
		 "test \"$(find %s -name 'r*' -type f -links 1 | wc -l)\" = 2",
		 victim, victim, dir);
	ck_assert_int_eq(system(cmd), 0);
	snprintf(cmd, sizeof(cmd), "%s/v1", victim);
	ck_assert_int_eq(stat(cmd, &st), 0);
	ck_assert_int_eq(st.st_nlink, 1);
	snprintf(cmd, sizeof(cmd), "rm -rf %s", victim);
	ck_assert_int_eq(system(cmd), 0);
}
END_TEST

/* The directory itself: a link, or one others can write, is refused in
 * one line naming it. */
START_TEST(directory_checked)
{
	struct sfs_disk *d;
	char path[96];
	snprintf(path, sizeof(path), "%s/link", dir);
	ck_assert_int_eq(symlink(dir, path), 0);
	ck_assert_int_eq(sfs_disk_open(path, 0, &d, err, sizeof(err)), -ELOOP);
	ck_assert_msg(strstr(err, path) && strstr(err, "a symbolic link"), "%s",
		      err);
	snprintf(path, sizeof(path), "%s/open", dir);
	ck_assert_int_eq(mkdir(path, 0700), 0);
	ck_assert_int_eq(chmod(path, 0722), 0);
	ck_assert_int_eq(sfs_disk_open(path, 0, &d, err, sizeof(err)), -EPERM);
	ck_assert_msg(strstr(err, "group or others can write it (mode 722)"),
		      "%s", err);
	ck_assert_int_eq(chmod(path, 0755), 0);
	ck_assert_int_eq(sfs_disk_open(path, 0, &d, err, sizeof(err)), 0);
	sfs_disk_close(d);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("disk");
	TCase *t = tcase_create("disk");
	tcase_add_checked_fixture(t, setup, teardown);
	tcase_add_test(t, round_trip_and_misses);
	tcase_add_test(t, one_user_per_directory);
	tcase_add_test(t, foreign_directory_started_afresh);
	tcase_add_test(t, bound_removes_least_recently_used);
	tcase_add_test(t, drop_frees_space);
	tcase_add_test(t, count_survives_drops);
	tcase_add_test(t, eviction_never_follows_or_takes_others);
	tcase_add_test(t, region_links_replaced);
	tcase_add_test(t, directory_checked);
	tcase_add_test(t, released_sources_freed);
	tcase_set_timeout(t, 30);
	suite_add_tcase(s, t);
	return sfs_check_run(s);
}
