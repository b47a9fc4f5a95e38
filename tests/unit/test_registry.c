/* SPDX-License-Identifier: MIT */
/*
 * Unit tests: the etcd registry client's codec (control/registry),
 * against answers recorded from Debian's etcd-server 3.4.23 through its
 * JSON gateway, and hostile variants of them; the --registry URL and
 * the auth file.
 */
#include "control/registry.h"

#include "common/log.h"

#include "check_run.h"

#include <check.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct seen {
	int n;
	char keys[8][64];
	char vals[8][64];
	enum sfs_reg_type types[8];
	int64_t revs[8];
	char whys[8][128];
};

static int collect(void *arg, const struct sfs_reg_event *e)
{
	struct seen *s = arg;
	if (s->n < 8) {
		snprintf(s->keys[s->n], 64, "%s", e->key);
		snprintf(s->vals[s->n], 64, "%s", e->value);
		s->types[s->n] = e->type;
		s->revs[s->n] = e->mod_revision;
		snprintf(s->whys[s->n], 128, "%s", e->why ? e->why : "");
	}
	s->n++;
	return 0;
}

#define HDR                                                                    \
	"\"header\":{\"cluster_id\":\"324952591200643719\",\"member_id\":"     \
	"\"3319814642761637952\",\"revision\":\"4\",\"raft_term\":\"2\"}"

/* Recorded: POST /v3/kv/range for /seedfs/ after one put. */
static const char range_ans[] =
	"{" HDR ",\"kvs\":[{\"key\":\"L3NlZWRmcy9h\",\"create_revision\":\"2\","
	"\"mod_revision\":\"2\",\"version\":\"1\",\"value\":\"aGVsbG8=\"}],"
	"\"count\":\"1\"}";

START_TEST(range)
{
	struct seen s = {0};
	int64_t rev = 0;
	char err[256];
	ck_assert_int_eq(sfs_reg_parse_range(range_ans, strlen(range_ans), 10,
					     collect, &s, &rev, err,
					     sizeof(err)),
			 0);
	ck_assert_int_eq(rev, 4);
	ck_assert_int_eq(s.n, 1);
	ck_assert_str_eq(s.keys[0], "/seedfs/a");
	ck_assert_str_eq(s.vals[0], "hello");
	ck_assert_int_eq(s.revs[0], 2);

	/* An empty range: no kvs at all (the gateway leaves it out). */
	const char *empty = "{" HDR "}";
	s.n = 0;
	ck_assert_int_eq(sfs_reg_parse_range(empty, strlen(empty), 10, collect,
					     &s, &rev, err, sizeof(err)),
			 0);
	ck_assert_int_eq(s.n, 0);

	/* More keys than asked for. */
	ck_assert_int_eq(sfs_reg_parse_range(range_ans, strlen(range_ans), 0,
					     collect, &s, &rev, err,
					     sizeof(err)),
			 -E2BIG);
}
END_TEST

static void refused(const char *body, const char *field)
{
	struct seen s = {0};
	int64_t rev;
	char err[256] = "";
	int rc = sfs_reg_parse_range(body, strlen(body), 10, collect, &s, &rev,
				     err, sizeof(err));
	ck_assert_msg(rc == -EPROTO, "%s: rc %d", body, rc);
	ck_assert_msg(strstr(err, field), "'%s' does not name %s", err, field);
	ck_assert_int_eq(s.n, 0);
}

/* A record that cannot be taken: delivered with why naming the part,
 * so the range goes on. */
static void record_refused(const char *body, const char *field)
{
	struct seen s = {0};
	int64_t rev;
	char err[256] = "";
	int rc = sfs_reg_parse_range(body, strlen(body), 10, collect, &s, &rev,
				     err, sizeof(err));
	ck_assert_msg(rc == 0, "%s: rc %d (%s)", body, rc, err);
	ck_assert_int_eq(s.n, 1);
	ck_assert_msg(strstr(s.whys[0], field), "'%s' does not name %s",
		      s.whys[0], field);
}

START_TEST(range_hostile)
{
	refused("", "not a JSON object");
	refused("[1,2]", "not a JSON object");
	refused("{\"kvs\":[]}", "header.revision");
	refused("{\"header\":{\"revision\":\"x4\"}}", "header.revision");
	refused("{\"header\":{\"revision\":\"-4\"}}", "header.revision");
	refused("{" HDR ",\"kvs\":{}}", "kvs");
	refused("{" HDR ",\"kvs\":[7]}", "kv");
	refused("{" HDR ",\"kvs\":[{\"key\":\"YQ==\",\"mod_revision\":\"z\"}]}",
		"mod_revision");
	record_refused("{" HDR ",\"kvs\":[{\"value\":\"aGVsbG8=\"}]}", "key");
	record_refused("{" HDR ",\"kvs\":[{\"key\":\"!!!!\"}]}", "key");
	record_refused("{" HDR ",\"kvs\":[{\"key\":\"YQ\"}]}",
		       "key"); /* no pad */
	/* A key with a NUL in it. */
	record_refused("{" HDR ",\"kvs\":[{\"key\":\"YQBi\"}]}", "key");
	record_refused("{" HDR ",\"kvs\":[{\"key\":\"YQ==\",\"value\":7}]}",
		       "value");

	/* A value over the cap. */
	size_t n = (SFS_REG_VALUE_MAX + 3) / 3 * 4 + 4;
	char *big = malloc(n + 200);
	int k = snprintf(big, 200,
			 "{" HDR ",\"kvs\":[{\"key\":\"YQ==\","
			 "\"value\":\"");
	memset(big + k, 'A', n);
	strcpy(big + k + n, "\"}]}");
	record_refused(big, "over");
	free(big);
}
END_TEST

/* Recorded: a /v3/watch stream's messages (created, a put, a delete). */
static const char w_created[] = "{\"result\":{" HDR ",\"created\":true}}";
static const char w_put[] =
	"{\"result\":{" HDR ",\"events\":[{\"kv\":{\"key\":\"L3NlZWRmcy9i\","
	"\"create_revision\":\"3\",\"mod_revision\":\"3\",\"version\":\"1\","
	"\"value\":\"eA==\"}}]}}";
static const char w_del[] =
	"{\"result\":{" HDR ",\"events\":[{\"type\":\"DELETE\",\"kv\":{\"key\":"
	"\"L3NlZWRmcy9i\",\"mod_revision\":\"4\"}}]}}";
/* Recorded: a watch from a compacted revision. */
static const char w_compacted[] =
	"{\"result\":{\"header\":{\"cluster_id\":\"324952591200643719\","
	"\"member_id\":\"3319814642761637952\",\"raft_term\":\"2\"},"
	"\"canceled\":true,\"compact_revision\":\"4\"}}";

START_TEST(watch)
{
	struct seen s = {0};
	int64_t next = 2, compact;
	int created, canceled;
	char err[256];

	ck_assert_int_eq(sfs_reg_parse_watch(w_created, strlen(w_created),
					     collect, &s, &next, &created,
					     &canceled, &compact, err,
					     sizeof(err)),
			 0);
	ck_assert(created && !canceled);
	ck_assert_int_eq(next, 2); /* nothing delivered: no move */
	ck_assert_int_eq(sfs_reg_parse_watch(w_put, strlen(w_put), collect, &s,
					     &next, &created, &canceled,
					     &compact, err, sizeof(err)),
			 0);
	ck_assert_int_eq(sfs_reg_parse_watch(w_del, strlen(w_del), collect, &s,
					     &next, &created, &canceled,
					     &compact, err, sizeof(err)),
			 0);
	ck_assert_int_eq(s.n, 2);
	ck_assert_int_eq(s.types[0], SFS_REG_PUT);
	ck_assert_str_eq(s.keys[0], "/seedfs/b");
	ck_assert_str_eq(s.vals[0], "x");
	ck_assert_int_eq(s.types[1], SFS_REG_DELETE);
	ck_assert_str_eq(s.keys[1], "/seedfs/b");
	ck_assert_str_eq(s.vals[1], "");
	ck_assert_int_eq(next, 5);

	ck_assert_int_eq(sfs_reg_parse_watch(w_compacted, strlen(w_compacted),
					     collect, &s, &next, &created,
					     &canceled, &compact, err,
					     sizeof(err)),
			 0);
	ck_assert(canceled);
	ck_assert_int_eq(compact, 4);
	ck_assert_int_eq(s.n, 2);

	/* Hostile messages: refused, nothing delivered. */
	const char *bad[] = {
		"nope",
		"{\"result\":7}",
		"{\"result\":{\"header\":{}}}",
		"{\"result\":{" HDR ",\"events\":{}}}",
		"{\"result\":{" HDR ",\"events\":[{\"type\":\"EXPLODE\","
		"\"kv\":{\"key\":\"YQ==\"}}]}}",
		"{\"result\":{" HDR ",\"events\":[{\"kv\":7}]}}",
		"{\"result\":{" HDR ",\"canceled\":true,"
		"\"compact_revision\":[]}}",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int rc = sfs_reg_parse_watch(bad[i], strlen(bad[i]), collect,
					     &s, &next, &created, &canceled,
					     &compact, err, sizeof(err));
		ck_assert_msg(rc == -EPROTO, "%s: %d", bad[i], rc);
		ck_assert_msg(!strncmp(err, "watch", 5), "%s", err);
	}
	ck_assert_int_eq(s.n, 2);
	/* An error in the stream (etcd's own): -EIO with its message. */
	const char *e = "{\"error\":{\"grpc_code\":16,\"http_code\":401,"
			"\"message\":\"etcdserver: invalid auth token\"}}";
	ck_assert_int_eq(sfs_reg_parse_watch(e, strlen(e), collect, &s, &next,
					     &created, &canceled, &compact, err,
					     sizeof(err)),
			 -EIO);
	ck_assert_ptr_nonnull(strstr(err, "invalid auth token"));
}
END_TEST

/* etcd's answer is not trusted to stop below INT64_MAX: a revision no
 * other can follow is refused in one line (the caller watches from it
 * + 1); the one before it is taken. */
START_TEST(revision_at_the_end)
{
	struct seen s = {0};
	int64_t rev = 0, next = 2, compact;
	int created, canceled;
	char err[256];
#define LAST "9223372036854775807"
#define HDR_AT(r) "\"header\":{\"cluster_id\":\"1\",\"revision\":\"" r "\"}"
	static const struct {
		int watch;
		const char *body, *err;
	} bad[] = {
		{0, "{" HDR_AT(LAST) "}",
		 "range: header.revision: 9223372036854775807, the last int64: "
		 "no revision can follow it"},
		{0,
		 "{" HDR ",\"kvs\":[{\"key\":\"YQ==\",\"mod_revision\":"
		 "\"" LAST "\"}]}",
		 "range: kvs[0]: mod_revision: 9223372036854775807, the last "
		 "int64: no revision can follow it"},
		{1, "{\"result\":{" HDR_AT(LAST) "}}",
		 "watch: header.revision: 9223372036854775807, the last int64: "
		 "no revision can follow it"},
		{1,
		 "{\"result\":{" HDR ",\"events\":[{\"kv\":{\"key\":"
		 "\"YQ==\",\"mod_revision\":" LAST "}}]}}",
		 "watch: events[0]: mod_revision: 9223372036854775807, the last "
		 "int64: no revision can follow it"},
		{1,
		 "{\"result\":{\"canceled\":true,\"compact_revision\":"
		 "\"" LAST "\"}}",
		 "watch: compact_revision: 9223372036854775807, the last int64: "
		 "no revision can follow it"},
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		const char *b = bad[i].body;
		int rc = bad[i].watch
				 ? sfs_reg_parse_watch(b, strlen(b), collect,
						       &s, &next, &created,
						       &canceled, &compact, err,
						       sizeof(err))
				 : sfs_reg_parse_range(b, strlen(b), 10,
						       collect, &s, &rev, err,
						       sizeof(err));
		ck_assert_msg(rc == -EPROTO, "%s: %d", b, rc);
		ck_assert_str_eq(err, bad[i].err);
	}
	ck_assert_int_eq(s.n, 0);
	ck_assert_int_eq(next, 2);
	/* One below it: taken, and the next revision is the last. */
	const char *w = "{\"result\":{" HDR_AT("9223372036854775806") "}}";
	ck_assert_int_eq(sfs_reg_parse_watch(w, strlen(w), collect, &s, &next,
					     &created, &canceled, &compact, err,
					     sizeof(err)),
			 0);
	const char *e = "{\"result\":{" HDR_AT(
		"9223372036854775806") ",\"events\":[{\"kv\":{\"key\":\"YQ==\","
				       "\"mod_revision\":\"9223372036854775806\"}}]}}";
	ck_assert_int_eq(sfs_reg_parse_watch(e, strlen(e), collect, &s, &next,
					     &created, &canceled, &compact, err,
					     sizeof(err)),
			 0);
	ck_assert_int_eq(s.n, 1);
	ck_assert_int_eq(next, INT64_MAX);
#undef LAST
#undef HDR_AT
}
END_TEST

static int open_url(const char *url, char *err, size_t len, struct sfs_reg **g)
{
	struct sfs_reg_cfg c = {.url = url};
	return sfs_reg_open(&c, g, err, len);
}

START_TEST(urls)
{
	struct sfs_reg *g;
	char err[256];
	ck_assert_int_eq(
		open_url("etcd://127.0.0.1:2379", err, sizeof(err), &g), 0);
	ck_assert_str_eq(sfs_reg_prefix(g), "/seedfs");
	sfs_reg_free(g);
	ck_assert_int_eq(open_url("etcds://a:1,b:2,[::1]:3/fleet/a/", err,
				  sizeof(err), &g),
			 0);
	ck_assert_str_eq(sfs_reg_prefix(g), "/fleet/a");
	sfs_reg_free(g);
	const char *bad[] = {
		"http://a:1",  "etcd://",
		"etcd://a",    "etcd://a:1,,b",
		"etcd://a:1/", "etcd://1:1,2:2,3:3,4:4,5:5,6:6,7:7,8:8,9:9"};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		*err = '\0';
		int rc = open_url(bad[i], err, sizeof(err), &g);
		ck_assert_msg(rc == -EINVAL, "%s: %d", bad[i], rc);
		ck_assert_msg(strstr(err, "--registry"), "%s", err);
	}
	/* A CA without TLS. */
	struct sfs_reg_cfg c = {.url = "etcd://a:1", .ca_file = "/etc/hosts"};
	ck_assert_int_eq(sfs_reg_open(&c, &g, err, sizeof(err)), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "--registry-ca"));
	sfs_reg_free(NULL);
}
END_TEST

START_TEST(auth_file)
{
	char path[] = "/tmp/sfs-reg-auth-XXXXXX", err[256];
	int fd = mkstemp(path);
	struct sfs_reg *g;
	ck_assert_int_ge(fd, 0);
	struct sfs_reg_cfg c = {.url = "etcd://a:1", .auth_file = path};
	ck_assert_int_eq(write(fd, "root:pa:ss\n", 11), 11);
	ck_assert_int_eq(sfs_reg_open(&c, &g, err, sizeof(err)), 0);
	sfs_reg_free(g);
	ck_assert_int_eq(ftruncate(fd, 0), 0);
	ck_assert_int_eq(pwrite(fd, "nocolon\n", 8, 0), 8);
	ck_assert_int_eq(sfs_reg_open(&c, &g, err, sizeof(err)), -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "USER:PASSWORD"));
	ck_assert_ptr_null(strstr(err, "nocolon")); /* no secret echoed */
	/* A secret's file: a mode its group or others can read is
	 * refused, naming the file and the mode. */
	ck_assert_int_eq(pwrite(fd, "root:pass\n", 10, 0), 10);
	ck_assert_int_eq(fchmod(fd, 0644), 0);
	ck_assert_int_eq(sfs_reg_open(&c, &g, err, sizeof(err)), -EACCES);
	ck_assert_msg(strstr(err, "--registry-auth-file") &&
			      strstr(err, path) && strstr(err, "mode 0644"),
		      "%s", err);
	ck_assert_int_eq(fchmod(fd, 0400), 0);
	ck_assert_int_eq(sfs_reg_open(&c, &g, err, sizeof(err)), 0);
	sfs_reg_free(g);
	close(fd);
	unlink(path);
	ck_assert_int_eq(sfs_reg_open(&c, &g, err, sizeof(err)), -ENOENT);
	ck_assert_ptr_nonnull(strstr(err, "--registry-auth-file"));
}
END_TEST

/* The log's lines so far (the test's own file) [static]. */
static const char *log_text(const char *path)
{
	static char buf[4096];
	FILE *f = fopen(path, "r");
	size_t n = f ? fread(buf, 1, sizeof(buf) - 1, f) : 0;
	if (f)
		fclose(f);
	buf[n] = '\0';
	return buf;
}

/* A password over etcd:// to another host is warned about, once, in
 * one line; etcds:// and loopback are not. */
START_TEST(auth_plain)
{
	char path[] = "/tmp/sfs-reg-auth-XXXXXX", err[256];
	char logp[] = "/tmp/sfs-reg-log-XXXXXX";
	int fd = mkstemp(path), lfd = mkstemp(logp);
	struct sfs_reg *g;
	ck_assert_int_ge(fd, 0);
	ck_assert_int_ge(lfd, 0);
	ck_assert_int_eq(write(fd, "root:pass\n", 10), 10);
	ck_assert_int_eq(sfs_log_to_file(logp), 0);
	static const char *const quiet[] = {
		"etcds://etcd.example:2379",
		"etcd://127.0.0.1:2379",
		"etcd://localhost:2379,[::1]:2379",
	};
	for (size_t i = 0; i < sizeof(quiet) / sizeof(quiet[0]); i++) {
		struct sfs_reg_cfg c = {.url = quiet[i], .auth_file = path};
		ck_assert_int_eq(sfs_reg_open(&c, &g, err, sizeof(err)), 0);
		sfs_reg_free(g);
	}
	struct sfs_reg_cfg n = {.url = "etcd://127.0.0.1:2379"};
	ck_assert_int_eq(sfs_reg_open(&n, &g, err, sizeof(err)), 0);
	sfs_reg_free(g);
	ck_assert_str_eq(log_text(logp), "");
	struct sfs_reg_cfg c = {.url = "etcd://127.0.0.1:2379,10.0.0.7:2379",
				.auth_file = path};
	ck_assert_int_eq(sfs_reg_open(&c, &g, err, sizeof(err)), 0);
	sfs_reg_free(g);
	const char *t = log_text(logp);
	ck_assert_msg(strstr(t, " W registry: --registry-auth-file with "
				"etcd://127.0.0.1:2379,10.0.0.7:2379: etcd's "
				"password crosses the network to 10.0.0.7:2379 "
				"in clear; use etcds:// (TLS)\n"),
		      "%s", t);
	ck_assert_ptr_eq(strchr(t, '\n'), t + strlen(t) - 1); /* one line */
	close(fd);
	close(lfd);
	unlink(path);
	unlink(logp);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("registry");
	TCase *t = tcase_create("registry");
	tcase_add_test(t, range);
	tcase_add_test(t, range_hostile);
	tcase_add_test(t, watch);
	tcase_add_test(t, revision_at_the_end);
	tcase_add_test(t, urls);
	tcase_add_test(t, auth_file);
	tcase_add_test(t, auth_plain);
	suite_add_tcase(s, t);
	return sfs_check_run(s);
}
