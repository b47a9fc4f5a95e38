/* SPDX-License-Identifier: MIT */
/*
 * The control port's token and TLS options (control/auth.h, tls.h):
 * token files, Authorization headers, the check, rotation, pins, and
 * the mode and owner a secret's file must have.
 */
#include "control/auth.h"
#include "control/control.h"
#include "control/sign.h"
#include "control/tls.h"

#include "check_run.h"

#include <check.h>
#include <errno.h>
#include <gnutls/crypto.h>
#include <gnutls/gnutls.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char err[512], dir[] = "/tmp/sfs-auth-XXXXXX";

static const char *put(const char *name, const char *text, mode_t mode)
{
	static char path[256];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	FILE *f = fopen(path, "w");
	ck_assert_ptr_nonnull(f);
	fputs(text, f);
	fclose(f);
	chmod(path, mode);
	return path;
}

START_TEST(token_files)
{
	size_t off, len;
	const char *t = "  0123456789abcdef0123456789abcdef \n";
	ck_assert_int_eq(sfs_auth_parse_token(t, strlen(t), &off, &len, err,
					      sizeof(err)),
			 0);
	ck_assert_uint_eq(off, 2);
	ck_assert_uint_eq(len, 32);
	static const struct {
		const char *text, *why;
	} bad[] = {
		{"short\n", "the token has 5 characters"},
		{"0123456789abcdef\nmore\n", "more than one line"},
		{"0123456789ab cdef0123\n", "byte 13 (0x20)"},
		{"0123456789abcdef\"\n", "byte 17 (0x22)"},
		{"", "the token has 0 characters"},
		{"==0123456789abcdef\n", "byte 3 (0x30)"},
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		err[0] = '\0';
		ck_assert_int_eq(sfs_auth_parse_token(bad[i].text,
						      strlen(bad[i].text), &off,
						      &len, err, sizeof(err)),
				 -EINVAL);
		ck_assert_msg(strstr(err, bad[i].why), "%s: %s", bad[i].text,
			      err);
	}
	/* Padding only at the end; CRLF is one line end. */
	t = "0123456789abcdef0123==\r\n";
	ck_assert_int_eq(sfs_auth_parse_token(t, strlen(t), &off, &len, err,
					      sizeof(err)),
			 0);
	ck_assert_uint_eq(len, 22);
}
END_TEST

START_TEST(bearer)
{
	const char *tok;
	size_t len;
	ck_assert_int_eq(sfs_auth_parse_bearer("Bearer abc==", &tok, &len), 0);
	ck_assert_uint_eq(len, 5);
	ck_assert_int_eq(sfs_auth_parse_bearer("bEaReR \t x  ", &tok, &len), 0);
	ck_assert(len == 1 && *tok == 'x');
	static const char *const bad[] = {
		"Bearer",     "Bearer ",       "Bearerx abc", "Basic abc",
		"Bearer a b", "Bearer a=b",    "Bearer a\"",  "",
		" Bearer a",  "Bearer abc\r\n"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		ck_assert_msg(sfs_auth_parse_bearer(bad[i], &tok, &len) ==
				      -EBADMSG,
			      "accepted '%s'", bad[i]);
	ck_assert_int_eq(sfs_auth_parse_bearer(NULL, &tok, &len), -EBADMSG);
}
END_TEST

START_TEST(check_and_rotate)
{
	struct sfs_auth *a;
	char hdr[700];
	const char *p = put("tok", "0123456789abcdef0123456789abcdef\n", 0600);
	ck_assert_int_eq(sfs_auth_load(p, "--token-file", &a, err, sizeof(err)),
			 0);
	ck_assert_str_eq(sfs_auth_path(a), p);
	ck_assert_int_eq(sfs_auth_check(a, NULL), -ENOKEY);
	ck_assert_int_eq(sfs_auth_check(a, "Basic x"), -EBADMSG);
	ck_assert_int_eq(
		sfs_auth_check(a, "Bearer 0123456789abcdef0123456789abcdef"),
		0);
	ck_assert_int_eq(
		sfs_auth_check(a, "Bearer 0123456789abcdef0123456789abcdeF"),
		-EACCES);
	ck_assert_int_eq(
		sfs_auth_check(a, "Bearer 0123456789abcdef0123456789abcde"),
		-EACCES); /* a prefix */
	ck_assert_int_eq(sfs_auth_header(a, hdr, sizeof(hdr)), 0);
	ck_assert_str_eq(hdr, "Authorization: Bearer "
			      "0123456789abcdef0123456789abcdef");
	ck_assert_int_eq(sfs_auth_header(a, hdr, 20), -ENOBUFS);

	int changed = -1;
	ck_assert_int_eq(sfs_auth_reload(a, &changed, err, sizeof(err)), 0);
	ck_assert_int_eq(changed, 0);
	put("tok", "fedcba9876543210fedcba9876543210\n", 0600);
	ck_assert_int_eq(sfs_auth_reload(a, &changed, err, sizeof(err)), 0);
	ck_assert_int_eq(changed, 1);
	ck_assert_int_eq(
		sfs_auth_check(a, "Bearer 0123456789abcdef0123456789abcdef"),
		-EACCES);
	ck_assert_int_eq(
		sfs_auth_check(a, "Bearer fedcba9876543210fedcba9876543210"),
		0);
	/* A bad file keeps the token in force. */
	put("tok", "oops\n", 0600);
	ck_assert_int_eq(sfs_auth_reload(a, &changed, err, sizeof(err)),
			 -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "--token-file"));
	ck_assert_int_eq(
		sfs_auth_check(a, "Bearer fedcba9876543210fedcba9876543210"),
		0);
	sfs_auth_free(a);
	sfs_auth_free(NULL);

	char missing[300];
	snprintf(missing, sizeof(missing), "%s/none", dir);
	ck_assert_int_eq(
		sfs_auth_load(missing, "--token-file", &a, err, sizeof(err)),
		-ENOENT);
	ck_assert_int_eq(
		sfs_auth_load(dir, "--token-file", &a, err, sizeof(err)),
		-EINVAL); /* a directory */
}
END_TEST

/*
 * The whole digest decides, not a part of it: wrong tokens whose
 * SHA-256 shares its first byte, its first 8 bytes but one, or all but
 * the last byte's low bit with the right one's... are found by search
 * for the first (1 in 256) and refused; so is every wrong token of a
 * thousand.  (A check of the first byte alone passed every other test.)
 */
START_TEST(whole_digest_compared)
{
	struct sfs_auth *a;
	const char *right = "0123456789abcdef0123456789abcdef";
	const char *p = put("tok", "0123456789abcdef0123456789abcdef\n", 0600);
	ck_assert_int_eq(sfs_auth_load(p, "--token-file", &a, err, sizeof(err)),
			 0);
	uint8_t want[32], d[32];
	ck_assert_int_eq(
		gnutls_hash_fast(GNUTLS_DIG_SHA256, right, strlen(right), want),
		0);
	char tok[64], hdr[80];
	int same_first = 0;
	for (unsigned i = 0; i < 100000 && same_first < 4; i++) {
		snprintf(tok, sizeof(tok), "wrong-token-%08u-padding", i);
		ck_assert_int_eq(gnutls_hash_fast(GNUTLS_DIG_SHA256, tok,
						  strlen(tok), d),
				 0);
		snprintf(hdr, sizeof(hdr), "Bearer %s", tok);
		if (d[0] == want[0]) {
			same_first++;
			ck_assert_msg(sfs_auth_check(a, hdr) == -EACCES,
				      "%s (its digest's first byte is the "
				      "token's) taken",
				      tok);
		} else if (i < 1000) {
			ck_assert_int_eq(sfs_auth_check(a, hdr), -EACCES);
		}
	}
	ck_assert_int_eq(same_first, 4);
	snprintf(hdr, sizeof(hdr), "Bearer %s", right);
	ck_assert_int_eq(sfs_auth_check(a, hdr), 0);
	sfs_auth_free(a);
}
END_TEST

START_TEST(pins)
{
	char out[SFS_TLS_PIN_MAX];
	const char *b64 =
		"sha256//erFIUM2u3Iopm4C1kj1NksJCJ9Gu5MD/jsZnjPGsGjI=";
	ck_assert_int_eq(
		sfs_tls_parse_pin(b64, out, sizeof(out), err, sizeof(err)), 0);
	ck_assert_str_eq(out, b64);
	ck_assert_int_eq(sfs_tls_parse_pin("7ab14850cdaedc8a299b80b5923d4d92"
					   "c24227d1aee4c0ff8ec6678cf1ac1a32",
					   out, sizeof(out), err, sizeof(err)),
			 0);
	ck_assert_str_eq(out, b64);
	ck_assert_int_eq(
		sfs_tls_parse_pin("SHA256:7A:B1:48:50:CD:AE:DC:8A:29:9B:80:B5:"
				  "92:3D:4D:92:C2:42:27:D1:AE:E4:C0:FF:8E:C6:"
				  "67:8C:F1:AC:1A:32",
				  out, sizeof(out), err, sizeof(err)),
		0);
	ck_assert_str_eq(out, b64);
	static const char *const bad[] = {
		"",
		"sha256//",
		"sha256//erFIUM2u3Iopm4C1kj1NksJCJ9Gu5MD",
		"7ab14850",
		"7ab14850cdaedc8a299b80b5923d4d92c24227d1aee4c0ff8"
		"ec6678cf1ac1a3200",
		"zz"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		ck_assert_msg(sfs_tls_parse_pin(bad[i], out, sizeof(out), err,
						sizeof(err)) == -EINVAL,
			      "accepted '%s'", bad[i]);
	ck_assert_ptr_nonnull(strstr(err, "--tls-pin"));
}
END_TEST

START_TEST(pairs)
{
	struct sfs_tls_pair *p;
	const char *c = put("c.pem", "not a certificate\n", 0644);
	char cert[300];
	snprintf(cert, sizeof(cert), "%s", c);
	const char *k = put("k.pem", "not a key\n", 0600);
	ck_assert_int_eq(sfs_tls_pair_load(cert, k, &p, err, sizeof(err)),
			 -EINVAL);
	ck_assert_msg(strstr(err, "--tls-cert") && strstr(err, cert), "%s",
		      err);
	ck_assert_int_eq(sfs_tls_pair_load("/nonexistent/c.pem", k, &p, err,
					   sizeof(err)),
			 -ENOENT);
	sfs_tls_pair_free(NULL);
}
END_TEST

/* Secret files as ssh takes keys: 0600 and 0400 of this user (or
 * root), nothing its group or others may read; refused in one line
 * naming the file and its mode (or owner). */
START_TEST(secret_modes)
{
	struct sfs_auth *a;
	struct sfs_tls_pair *p;
	struct stat st;
	const char *tok = "0123456789abcdef0123456789abcdef\n";
	static const mode_t ok[] = {0600, 0400};
	static const mode_t bad[] = {0644, 0640, 0604, 0660, 0601, 0620};
	char want[800];

	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		const char *path = put("ok.tok", tok, ok[i]);
		ck_assert_int_eq(sfs_auth_load(path, "--token-file", &a, err,
					       sizeof(err)),
				 0);
		sfs_auth_free(a);
		int fd = sfs_auth_open_secret(path, "--x", &st, err,
					      sizeof(err));
		ck_assert_int_ge(fd, 0);
		close(fd);
		unlink(path);
	}
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		const char *path = put("bad.tok", tok, bad[i]);
		ck_assert_int_eq(sfs_auth_load(path, "--token-file", &a, err,
					       sizeof(err)),
				 -EACCES);
		snprintf(want, sizeof(want),
			 "--token-file %s: mode %04o gives its group or others "
			 "access (0600 or 0400 wanted); chmod 600 %s",
			 path, (unsigned int)bad[i], path);
		ck_assert_str_eq(err, want);
		ck_assert_ptr_null(strchr(err, '\n'));
		unlink(path);
	}
	/* Every reader of a secret: the token (above), the TLS key (the
	 * certificate is public), and a reload after a chmod. */
	const char *k = put("k.pem", "not a key\n", 0644);
	char key[300];
	snprintf(key, sizeof(key), "%s", k);
	const char *c = put("c.pem", "not a certificate\n", 0644);
	ck_assert_int_eq(sfs_tls_pair_load(c, key, &p, err, sizeof(err)),
			 -EACCES);
	snprintf(want, sizeof(want),
		 "--tls-key %s: mode 0644 gives its group or others access "
		 "(0600 or 0400 wanted); chmod 600 %s",
		 key, key);
	ck_assert_str_eq(err, want);
	const char *path = put("rot.tok", tok, 0600);
	ck_assert_int_eq(
		sfs_auth_load(path, "--token-file", &a, err, sizeof(err)), 0);
	ck_assert_int_eq(chmod(path, 0640), 0);
	int changed = -1;
	ck_assert_int_eq(sfs_auth_reload(a, &changed, err, sizeof(err)),
			 -EACCES);
	ck_assert_int_eq(changed, -1);
	ck_assert_int_eq(
		sfs_auth_check(a, "Bearer 0123456789abcdef0123456789abcdef"),
		0); /* the old token stays */
	sfs_auth_free(a);

	/* A FIFO is refused at once, never waited on. */
	char fifo[300];
	snprintf(fifo, sizeof(fifo), "%s/fifo", dir);
	ck_assert_int_eq(mkfifo(fifo, 0600), 0);
	ck_assert_int_eq(
		sfs_auth_load(fifo, "--token-file", &a, err, sizeof(err)),
		-EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "not a regular file"));

	/* A symlink to a good file is fine (Kubernetes' secret volumes). */
	char link[300];
	path = put("target.tok", tok, 0400);
	snprintf(link, sizeof(link), "%s/link.tok", dir);
	ck_assert_int_eq(symlink(path, link), 0);
	ck_assert_int_eq(
		sfs_auth_load(link, "--token-file", &a, err, sizeof(err)), 0);
	sfs_auth_free(a);

	/* Owned by another user (not root): refused, even at 0600. */
	if (geteuid() == 0) {
		path = put("other.tok", tok, 0600);
		ck_assert_int_eq(chown(path, 65534, 65534), 0);
		ck_assert_int_eq(sfs_auth_load(path, "--token-file", &a, err,
					       sizeof(err)),
				 -EACCES);
		snprintf(want, sizeof(want),
			 "--token-file %s: owned by uid 65534, not by this "
			 "user (uid 0) or root",
			 path);
		ck_assert_str_eq(err, want);
	}
}
END_TEST

/* Trust anchors (--trust-key, --tls-ca): whoever may write one decides
 * what is trusted.  This user's or root's, nobody else may write it;
 * 0644 is fine.  Refused in one line naming the file and its mode (or
 * owner). */
START_TEST(anchor_modes)
{
	static const char pub[] =
		"-----BEGIN PUBLIC KEY-----\n"
		"MCowBQYDK2VwAyEAlVQNvg94HNMKmq2HGIbKAayekRgUKkDiHBs0i/Z2CUg=\n"
		"-----END PUBLIC KEY-----\n";
	static const mode_t ok[] = {0644, 0444, 0600, 0640, 0604, 0755};
	static const struct {
		mode_t mode;
		const char *who;
	} bad[] = {{0664, "its group"},
		   {0620, "its group"},
		   {0646, "others"},
		   {0666, "others"},
		   {0602, "others"}};
	struct sfs_trust *t;
	struct sfs_control_cred *c;
	struct stat st;
	char want[900], path[300];

	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		snprintf(path, sizeof(path), "%s", put("ok.pub", pub, ok[i]));
		ck_assert_msg(sfs_trust_load(path, &t, err, sizeof(err)) == 0,
			      "%04o: %s", (unsigned int)ok[i], err);
		sfs_trust_free(t);
		struct sfs_control_cred_cfg cc = {.tls_ca = path};
		ck_assert_msg(sfs_control_cred_new(&cc, &c, err, sizeof(err)) ==
				      0,
			      "%04o: %s", (unsigned int)ok[i], err);
		sfs_control_cred_free(c);
		unlink(path);
	}
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		snprintf(path, sizeof(path), "%s",
			 put("bad.pub", pub, bad[i].mode));
		ck_assert_int_eq(sfs_trust_load(path, &t, err, sizeof(err)),
				 -EACCES);
		snprintf(want, sizeof(want),
			 "--trust-key %s: mode %04o lets %s write it, and "
			 "whoever writes it decides what this trusts; chmod "
			 "go-w %s",
			 path, (unsigned int)bad[i].mode, bad[i].who, path);
		ck_assert_str_eq(err, want);
		struct sfs_control_cred_cfg cc = {.tls_ca = path};
		ck_assert_int_eq(
			sfs_control_cred_new(&cc, &c, err, sizeof(err)),
			-EACCES);
		ck_assert_ptr_nonnull(strstr(err, "--tls-ca "));
		ck_assert_ptr_nonnull(strstr(err, "write it"));
		unlink(path);
	}
	/* Missing, or a FIFO: one line, never a wait. */
	snprintf(path, sizeof(path), "%s/none.pem", dir);
	struct sfs_control_cred_cfg cc = {.tls_ca = path};
	ck_assert_int_eq(sfs_control_cred_new(&cc, &c, err, sizeof(err)),
			 -ENOENT);
	snprintf(want, sizeof(want), "--tls-ca %s: %s", path, strerror(ENOENT));
	ck_assert_str_eq(err, want);
	snprintf(path, sizeof(path), "%s/fifo.pem", dir);
	ck_assert_int_eq(mkfifo(path, 0644), 0);
	ck_assert_int_eq(
		sfs_auth_open_anchor(path, "--tls-ca", &st, err, sizeof(err)),
		-EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "not a regular file"));
	/* Another user's, even 0644: refused. */
	if (geteuid() == 0) {
		snprintf(path, sizeof(path), "%s", put("other.pub", pub, 0644));
		ck_assert_int_eq(chown(path, 65534, 65534), 0);
		ck_assert_int_eq(sfs_trust_load(path, &t, err, sizeof(err)),
				 -EACCES);
		snprintf(want, sizeof(want),
			 "--trust-key %s: owned by uid 65534, not by this "
			 "user (uid 0) or root",
			 path);
		ck_assert_str_eq(err, want);
	}
}
END_TEST

int main(void)
{
	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 1;
	}
	Suite *s = suite_create("auth");
	TCase *t = tcase_create("auth");
	tcase_add_test(t, token_files);
	tcase_add_test(t, bearer);
	tcase_add_test(t, check_and_rotate);
	tcase_add_test(t, whole_digest_compared);
	tcase_add_test(t, pins);
	tcase_add_test(t, pairs);
	tcase_add_test(t, secret_modes);
	tcase_add_test(t, anchor_modes);
	suite_add_tcase(s, t);
	int rc = sfs_check_run(s);
	char cmd[300];
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	if (system(cmd))
		rc = rc ? rc : 1;
	return rc;
}
