/* SPDX-License-Identifier: MIT */
/*
 * The signed generations a replica took (control/signstate.h): the
 * file's parser against hostile contents (each refused naming its line
 * and field), the rules (an older generation of one run, an older run
 * of one signer), and the file itself (written 0600, merged between
 * processes, its directory and mode checked).
 */
#include "control/signstate.h"
#include "metadata/manifest.h"

#include "check_run.h"

#include <check.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char err[600];

#define HDR "seedfs-signed-generations 1\n"
#define KEY "0123456789abcdef"
#define RUN_A "00000000000000aa"
#define S 1000000000ll

/* A record line: model, generation, signed_at (run A, key KEY). */
#define REC(model, gen, at) model " " KEY " seed-1 " RUN_A " " #gen " " #at "\n"

/* @text refused, naming @needle. */
static void refused(const char *text, size_t len, const char *needle)
{
	struct sfs_signstate *s = NULL;
	err[0] = '\0';
	int rc = sfs_signstate_parse(text, len, "F", &s, err, sizeof(err));
	ck_assert_msg(rc < 0, "taken: %.80s", text);
	ck_assert_ptr_null(s);
	ck_assert_msg(strstr(err, needle), "'%s' lacks '%s' (for %.60s)", err,
		      needle, text);
}
#define REFUSED(text, needle) refused(text, strlen(text), needle)

START_TEST(parse_good)
{
	const char *text = HDR REC("llama-8b", 3, 1764547200000000001)
		REC("a%20b%25c%C3%A9", 0, 5);
	struct sfs_signstate *s;
	ck_assert_msg(sfs_signstate_parse(text, strlen(text), "F", &s, err,
					  sizeof(err)) == 0,
		      "%s", err);
	ck_assert_uint_eq(sfs_signstate_count(s), 2);
	char *out;
	size_t len;
	ck_assert_int_eq(sfs_signstate_text(s, &out, &len), 0);
	ck_assert_str_eq(out, text);
	free(out);
	sfs_signstate_free(s);
	/* Only a header: no record. */
	ck_assert_int_eq(sfs_signstate_parse(HDR, strlen(HDR), "F", &s, err,
					     sizeof(err)),
			 0);
	ck_assert_uint_eq(sfs_signstate_count(s), 0);
	sfs_signstate_free(s);
}
END_TEST

START_TEST(parse_hostile)
{
	REFUSED("", "F: line 1: not \"seedfs-signed-generations 1\"");
	REFUSED("seedfs-signed-generations 2\n", "line 1:");
	REFUSED(HDR "m " KEY " s " RUN_A " 1 5", "line 2: no newline");
	REFUSED(HDR REC("m", 1, 5) "m " KEY " s " RUN_A " 1\n",
		"line 3: not 6 fields");
	REFUSED(HDR "m " KEY " s " RUN_A " 1 5 7\n", "line 2: more than 6");
	REFUSED(HDR "m  " KEY " s " RUN_A " 1 5\n", "line 2:");
	REFUSED(HDR "\n", "line 2: not 6 fields");
	REFUSED(HDR REC("m", 1, 5) "\r\n", "line 3:");
	REFUSED(HDR "m " KEY " s " RUN_A " 1 5\r\n", "line 2: signed_at");
	/* The model: a name, one component, written %XX in capitals. */
	REFUSED(HDR REC("a%2Fb", 1, 5), "line 2: model");
	REFUSED(HDR REC("a%2fb", 1, 5), "line 2: model");
	REFUSED(HDR REC("a%0Ab", 1, 5), "line 2: model");
	REFUSED(HDR REC("a%00b", 1, 5), "line 2: model");
	REFUSED(HDR REC("a%zzb", 1, 5), "line 2: model");
	REFUSED(HDR REC("ab%4", 1, 5), "line 2: model");
	REFUSED(HDR REC("..", 1, 5), "line 2: model");
	REFUSED(HDR REC("a/b", 1, 5), "line 2: model");
	REFUSED(HDR REC("%FF", 1, 5), "line 2: model"); /* not UTF-8 */
	char big[2048] = HDR;
	size_t n = strlen(big);
	memset(big + n, 'x', 256);
	snprintf(big + n + 256, sizeof(big) - n - 256,
		 " " KEY " s " RUN_A " 1 5\n");
	REFUSED(big, "line 2: model");
	/* The key, the signer, the run. */
	REFUSED(HDR "m 0123456789ABCDEF s " RUN_A " 1 5\n", "line 2: key");
	REFUSED(HDR "m 0123456789abcde s " RUN_A " 1 5\n", "line 2: key");
	REFUSED(HDR "m " KEY " s/x " RUN_A " 1 5\n", "line 2: signer");
	REFUSED(HDR "m " KEY " s 0000000000000000 1 5\n", "line 2: run");
	REFUSED(HDR "m " KEY " s 00000000000000AA 1 5\n", "line 2: run");
	REFUSED(HDR "m " KEY " s 0000000000000000aa 1 5\n", "line 2: run");
	/* Numbers: decimal, no sign, no leading zero, within int64. */
	REFUSED(HDR REC("m", 01, 5), "line 2: generation");
	REFUSED(HDR REC("m", -1, 5), "line 2: generation");
	REFUSED(HDR REC("m", +1, 5), "line 2: generation");
	REFUSED(HDR REC("m", 0x10, 5), "line 2: generation");
	REFUSED(HDR REC("m", 9223372036854775808, 5), "line 2: generation");
	REFUSED(HDR REC("m", 99999999999999999999, 5), "line 2: generation");
	REFUSED(HDR REC("m", 1, 0), "line 2: signed_at");
	REFUSED(HDR REC("m", 1, 1e9), "line 2: signed_at");
	/* Twice the same key; a NUL; a long line. */
	REFUSED(HDR REC("m", 1, 5) REC("n", 1, 5) REC("m", 2, 6),
		"line 4: a model, key and signer listed before");
	const char nul[] = HDR "m " KEY " s\0 " RUN_A " 1 5\n";
	refused(nul, sizeof(nul) - 1, "line 2: a NUL byte");
	char line[1200];
	memset(line, 'y', sizeof(line));
	memcpy(line, HDR, strlen(HDR));
	line[sizeof(line) - 1] = '\n';
	refused(line, sizeof(line), "line 2: longer than 1024 bytes");
}
END_TEST

/* Caps: SFS_SIGNSTATE_MAX records, SFS_SIGNSTATE_BYTES bytes. */
START_TEST(parse_caps)
{
	size_t cap = (SFS_SIGNSTATE_MAX + 2) * 64, n;
	char *t = malloc(cap);
	ck_assert_ptr_nonnull(t);
	n = (size_t)snprintf(t, cap, HDR);
	for (int i = 0; i < SFS_SIGNSTATE_MAX; i++)
		n += (size_t)snprintf(t + n, cap - n,
				      "m%d " KEY " s " RUN_A " 1 %d\n", i,
				      i + 1);
	struct sfs_signstate *s;
	ck_assert_msg(sfs_signstate_parse(t, n, "F", &s, err, sizeof(err)) == 0,
		      "%s", err);
	/* Full: a new record takes the place of the one signed longest
	 * ago. */
	struct sfs_manifest m = {.has_sig = 1,
				 .model = "new",
				 .sig_key = KEY,
				 .signer = "s",
				 .signer_run = 0xaa,
				 .generation = 1,
				 .signed_at = 1000000};
	ck_assert_int_eq(sfs_signstate_take(s, &m, err, sizeof(err)), 0);
	ck_assert_uint_eq(sfs_signstate_count(s), SFS_SIGNSTATE_MAX);
	m.model = "m0"; /* gone: no record of it */
	m.signed_at = 1;
	ck_assert_int_eq(sfs_signstate_take(s, &m, err, sizeof(err)), 0);
	m.model = "m5"; /* still there: generation 1 signed at 6 */
	m.generation = 0;
	ck_assert_int_eq(sfs_signstate_take(s, &m, err, sizeof(err)), -ESTALE);
	sfs_signstate_free(s);
	n += (size_t)snprintf(t + n, cap - n, "x " KEY " s " RUN_A " 1 5\n");
	refused(t, n, "line 4098: more than 4096 records");
	free(t);
	char *huge = calloc(1, SFS_SIGNSTATE_BYTES + 2);
	ck_assert_ptr_nonnull(huge);
	refused(huge, SFS_SIGNSTATE_BYTES + 1, "more than the 4194304 allowed");
	free(huge);
}
END_TEST

/* The rules: an older generation of one run, an older run of one
 * signer (with SFS_SIGN_STEP_S of clock step), and nothing compared
 * across signers or keys. */
START_TEST(take_rules)
{
	struct sfs_signstate *s;
	ck_assert_int_eq(sfs_signstate_parse(HDR, strlen(HDR), "F", &s, err,
					     sizeof(err)),
			 0);
	const int64_t t = 1764547200 * S;
	struct sfs_manifest m = {.has_sig = 1,
				 .model = "llama",
				 .sig_key = KEY,
				 .signer = "seed-1",
				 .signer_run = 0xaa,
				 .generation = 2,
				 .signed_at = t};
	ck_assert_int_eq(sfs_signstate_take(s, &m, err, sizeof(err)), 0);
	m.generation = 1;
	m.signed_at = t + 10 * S; /* signed again later: still older */
	ck_assert_int_eq(sfs_signstate_take(s, &m, err, sizeof(err)), -ESTALE);
	ck_assert_str_eq(err, "generation 1 of seed-1's run 00000000000000aa "
			      "is older than generation 2 of that run, which "
			      "this replica took (remembered in memory): an "
			      "older generation played back?");
	m.generation = 2; /* the same one signed again: taken */
	ck_assert_int_eq(sfs_signstate_take(s, &m, err, sizeof(err)), 0);
	m.generation = 3;
	m.signed_at = t + 20 * S;
	ck_assert_int_eq(sfs_signstate_take(s, &m, err, sizeof(err)), 0);
	/* Another run (a restarted seed, counting from 1): signed more
	 * than SFS_SIGN_STEP_S before what was taken is refused. */
	m.signer_run = 0xbb;
	m.generation = 1;
	m.signed_at = t + 20 * S - (SFS_SIGN_STEP_S + 1) * S;
	ck_assert_int_eq(sfs_signstate_take(s, &m, err, sizeof(err)), -ESTALE);
	ck_assert_str_eq(err, "generation 1 of seed-1's run 00000000000000bb "
			      "was signed 61 s before generation 3 of its run "
			      "00000000000000aa, which this replica took "
			      "(remembered in memory; a signer's clock may "
			      "step back 60 s): an older run played back?");
	m.signed_at = t + 20 * S - (SFS_SIGN_STEP_S - 1) * S;
	ck_assert_int_eq(sfs_signstate_take(s, &m, err, sizeof(err)), 0);
	/* That run is followed now: run aa again, signed more than the
	 * step before it, is an older run. */
	m.signer_run = 0xaa;
	m.generation = 3;
	m.signed_at = t - 100 * S;
	ck_assert_int_eq(sfs_signstate_take(s, &m, err, sizeof(err)), -ESTALE);
	/* Another signer, another key: records of their own. */
	m.signed_at = t - 1000 * S;
	m.generation = 1;
	snprintf(m.signer, sizeof(m.signer), "seed-2");
	ck_assert_int_eq(sfs_signstate_take(s, &m, err, sizeof(err)), 0);
	snprintf(m.signer, sizeof(m.signer), "seed-1");
	snprintf(m.sig_key, sizeof(m.sig_key), "fedcba9876543210");
	ck_assert_int_eq(sfs_signstate_take(s, &m, err, sizeof(err)), 0);
	ck_assert_uint_eq(sfs_signstate_count(s), 3);
	/* Without a signer or run: not taken. */
	m.signer_run = 0;
	ck_assert_int_eq(sfs_signstate_take(s, &m, err, sizeof(err)), -EINVAL);
	sfs_signstate_free(s);
}
END_TEST

static char dir[] = "/tmp/sfs-signstate-XXXXXX";

static void path(char *buf, size_t len, const char *name)
{
	snprintf(buf, len, "%s/%s", dir, name);
}

/* The file: written 0600 on save, read at open, merged with what
 * another process wrote; its directory and mode checked. */
START_TEST(file)
{
	char d[256], f[300];
	struct sfs_signstate *a, *b;
	struct stat st;
	path(d, sizeof(d), "state/deeper");
	ck_assert_msg(sfs_signstate_open(d, &a, err, sizeof(err)) == 0, "%s",
		      err);
	ck_assert_int_eq(stat(d, &st), 0);
	ck_assert_uint_eq(st.st_mode & 07777, 0700);
	ck_assert_msg(sfs_signstate_open(d, &b, err, sizeof(err)) == 0, "%s",
		      err);
	struct sfs_manifest m = {.has_sig = 1,
				 .model = "x",
				 .sig_key = KEY,
				 .signer = "seed-1",
				 .signer_run = 0xaa,
				 .generation = 5,
				 .signed_at = 50 * S};
	ck_assert_int_eq(sfs_signstate_take(a, &m, err, sizeof(err)), 0);
	ck_assert_msg(sfs_signstate_save(a, err, sizeof(err)) == 0, "%s", err);
	snprintf(f, sizeof(f), "%s/" SFS_SIGNSTATE_FILE, d);
	ck_assert_int_eq(stat(f, &st), 0);
	ck_assert_uint_eq(st.st_mode & 07777, 0600);
	/* The other process reads it again before it takes anything. */
	m.generation = 4;
	ck_assert_int_eq(sfs_signstate_take(b, &m, err, sizeof(err)), -ESTALE);
	ck_assert_ptr_nonnull(strstr(err, f));
	m.model = "y";
	ck_assert_int_eq(sfs_signstate_take(b, &m, err, sizeof(err)), 0);
	ck_assert_int_eq(sfs_signstate_save(b, err, sizeof(err)), 0);
	m.model = "z";
	ck_assert_int_eq(sfs_signstate_take(a, &m, err, sizeof(err)), 0);
	ck_assert_int_eq(sfs_signstate_save(a, err, sizeof(err)), 0);
	sfs_signstate_free(a);
	sfs_signstate_free(b);
	/* A restart: all three, from either. */
	ck_assert_int_eq(sfs_signstate_open(d, &a, err, sizeof(err)), 0);
	ck_assert_uint_eq(sfs_signstate_count(a), 3);
	m.model = "x";
	ck_assert_int_eq(sfs_signstate_take(a, &m, err, sizeof(err)), -ESTALE);
	sfs_signstate_free(a);
	/* Refused: a file others may write, a link, one that does not
	 * parse; a directory others may write, or a link. */
	chmod(f, 0622);
	ck_assert_int_eq(sfs_signstate_open(d, &a, err, sizeof(err)), -EPERM);
	ck_assert_ptr_nonnull(strstr(err, "its group or others can write it"));
	chmod(f, 0600);
	FILE *w = fopen(f, "a");
	ck_assert_ptr_nonnull(w);
	fputs("x " KEY " seed-1 00000000000000aa 07 5\n", w);
	fclose(w);
	ck_assert_int_eq(sfs_signstate_open(d, &a, err, sizeof(err)), -EINVAL);
	ck_assert_msg(strstr(err, "signed-generations: line 5: generation") &&
			      strstr(err, "remove it to start afresh"),
		      "%s", err);
	unlink(f);
	ck_assert_int_eq(symlink("/etc/passwd", f), 0);
	ck_assert_int_eq(sfs_signstate_open(d, &a, err, sizeof(err)), -ELOOP);
	ck_assert_ptr_nonnull(strstr(err, "a symbolic link"));
	unlink(f);
	chmod(d, 0777);
	ck_assert_int_eq(sfs_signstate_open(d, &a, err, sizeof(err)), -EPERM);
	ck_assert_ptr_nonnull(
		strstr(err, "its group or others can write it (uid"));
	chmod(d, 0700);
	char l[300];
	path(l, sizeof(l), "link");
	ck_assert_int_eq(symlink(d, l), 0);
	ck_assert_int_eq(sfs_signstate_open(l, &a, err, sizeof(err)), -ELOOP);
	unlink(l);
	path(l, sizeof(l), "state");
	chmod(l, 0777); /* a parent others may change */
	ck_assert_int_eq(sfs_signstate_open(d, &a, err, sizeof(err)), -EPERM);
	ck_assert_ptr_nonnull(strstr(err, "its parent"));
	chmod(l, 0700);
	ck_assert_int_eq(sfs_signstate_open("relative", &a, err, sizeof(err)),
			 -EINVAL);
}
END_TEST

/* Where a replica keeps it by default. */
START_TEST(default_dir)
{
	char buf[512];
	setenv("SEEDFS_STATE_DIR", "/x/y", 1);
	ck_assert_int_eq(
		sfs_signstate_default_dir(buf, sizeof(buf), err, sizeof(err)),
		0);
	ck_assert_str_eq(buf, "/x/y");
	unsetenv("SEEDFS_STATE_DIR");
	ck_assert_int_eq(
		sfs_signstate_default_dir(buf, sizeof(buf), err, sizeof(err)),
		0);
	if (geteuid() == 0) {
		ck_assert_str_eq(buf, "/var/lib/seedfs");
	} else {
		setenv("XDG_STATE_HOME", "/s", 1);
		ck_assert_int_eq(sfs_signstate_default_dir(buf, sizeof(buf),
							   err, sizeof(err)),
				 0);
		ck_assert_str_eq(buf, "/s/seedfs");
	}
}
END_TEST

/* The record never moves back in time: run aa generation 5 taken, then
 * run bb (signed 59 s before it: a clock step), then run aa generation
 * 2, signed 118 s before generation 5: refused (it was taken while the
 * record followed bb's earlier time). */
START_TEST(runs_do_not_walk_back)
{
	struct sfs_signstate *s;
	ck_assert_int_eq(sfs_signstate_parse(HDR, strlen(HDR), "F", &s, err,
					     sizeof(err)),
			 0);
	const int64_t t = 1764547200 * S;
	struct sfs_manifest m = {.has_sig = 1,
				 .model = "llama",
				 .sig_key = KEY,
				 .signer = "seed-1",
				 .signer_run = 0xaa,
				 .generation = 5,
				 .signed_at = t};
	ck_assert_int_eq(sfs_signstate_take(s, &m, err, sizeof(err)), 0);
	m.signer_run = 0xbb;
	m.generation = 1;
	m.signed_at = t - 59 * S;
	ck_assert_int_eq(sfs_signstate_take(s, &m, err, sizeof(err)), 0);
	m.signer_run = 0xaa;
	m.generation = 2;
	m.signed_at = t - 118 * S;
	ck_assert_int_eq(sfs_signstate_take(s, &m, err, sizeof(err)), -ESTALE);
	/* Run bb goes on (its own clock, behind): taken. */
	m.signer_run = 0xbb;
	m.generation = 2;
	m.signed_at = t - 40 * S;
	ck_assert_int_eq(sfs_signstate_take(s, &m, err, sizeof(err)), 0);
	sfs_signstate_free(s);
}
END_TEST

int main(void)
{
	if (!mkdtemp(dir))
		return 1;
	Suite *s = suite_create("signstate");
	TCase *t = tcase_create("signstate");
	tcase_add_test(t, parse_good);
	tcase_add_test(t, parse_hostile);
	tcase_add_test(t, parse_caps);
	tcase_add_test(t, take_rules);
	tcase_add_test(t, file);
	tcase_add_test(t, default_dir);
	tcase_add_test(t, runs_do_not_walk_back);
	tcase_set_timeout(t, 30);
	suite_add_tcase(s, t);
	int rc = sfs_check_run(s);
	char cmd[300];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd))
		rc = rc ? rc : 1;
	return rc;
}
