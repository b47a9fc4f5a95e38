/* SPDX-License-Identifier: MIT */
/*
 * Unit tests: protocol names, option/environment precedence, "auto",
 * and the one-line error of each protocol this host cannot serve.  The
 * transports are opened for real; where a stack exists (an EFA host) the
 * test checks that it opens instead of checking the error.
 */
#include "bound.h"
#include "check_run.h"

#include "common/log.h"
#include "transports/rawkey.h"
#include "transports/transport.h"

#include <check.h>
#include <errno.h>
#include <infiniband/verbs.h>
#include <rdma/fabric.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* 1 if libfabric has @provider on this host. */
static int provider_present(const char *provider)
{
	struct fi_info *h = fi_allocinfo(), *i = NULL;
	h->fabric_attr->prov_name = strdup(provider);
	h->ep_attr->type = FI_EP_RDM;
	h->caps = FI_RMA | FI_READ | FI_REMOTE_READ;
	int rc = fi_getinfo(FI_VERSION(1, 14), NULL, NULL, 0, h, &i);
	fi_freeinfo(h);
	fi_freeinfo(i);
	return rc == 0;
}

static int lines(const char *s)
{
	int n = 1;
	for (; *s; s++)
		n += *s == '\n';
	return n;
}

START_TEST(choose_precedence)
{
	ck_assert_str_eq(sfs_xport_choose("tcp", "shm"), "tcp");
	ck_assert_str_eq(sfs_xport_choose(NULL, "shm"), "shm");
	ck_assert_str_eq(sfs_xport_choose("", "shm"), "shm");
	ck_assert_ptr_null(sfs_xport_choose(NULL, NULL));
	ck_assert_ptr_null(sfs_xport_choose(NULL, ""));
	ck_assert_str_eq(sfs_xport_choose("auto", NULL), "auto");
}
END_TEST

START_TEST(names)
{
	char list[200];
	static const char *const want[] = {"efa", "rdma-fabric", "tcp",
					   "shm", "sockets",	 "auto"};
	for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
		ck_assert_msg(sfs_xport_known(want[i], NULL, 0), "%s", want[i]);
	ck_assert(!sfs_xport_known("rdma2", NULL, 0));
	ck_assert(!sfs_xport_known("", NULL, 0));
	ck_assert(!sfs_xport_known(NULL, list, sizeof(list)));
	ck_assert_str_eq(list,
			 "efa, rdma, rdma-fabric, tcp, shm, sockets, auto");
	ck_assert_uint_eq(sfs_xport_count(), 6);
	ck_assert_ptr_null(sfs_xport_name(sfs_xport_count()));
}
END_TEST

START_TEST(unknown_protocol_message)
{
	struct sfs_xport_cfg c = {.protocol = "carrier-pigeon",
				  .role = SFS_XPORT_REPLICA};
	struct sfs_xport *x = NULL;
	char err[SFS_XPORT_ERR_MAX];
	ck_assert_int_eq(sfs_xport_open(&c, &x, err, sizeof(err)),
			 -EPROTONOSUPPORT);
	ck_assert_ptr_null(x);
	ck_assert_str_eq(err,
			 "protocol carrier-pigeon: unknown protocol; "
			 "known: efa, rdma, rdma-fabric, tcp, shm, sockets, "
			 "auto");
}
END_TEST

/* A protocol this host lacks: one line naming it, the query, the
 * error text and what to try; a host that has it opens it. */
static void absent_or_opens(const char *proto, const char *provider,
			    const char *missing)
{
	struct sfs_xport_cfg c = {
		.protocol = proto, .role = SFS_XPORT_SEED, .timeout_ms = 2000};
	struct sfs_xport *x = NULL;
	char err[SFS_XPORT_ERR_MAX] = "";
	char want[256];
	int rc = sfs_xport_open(&c, &x, err, sizeof(err));

	if (provider_present(provider)) {
		ck_assert_msg(rc == 0, "%s present but: %s", provider, err);
		sfs_xport_close(x);
		return;
	}
	ck_assert_int_ne(rc, 0);
	ck_assert_ptr_null(x);
	ck_assert_int_le(lines(err), 3);
	snprintf(want, sizeof(want),
		 "protocol %s: %s (fi_getinfo provider=%s: ", proto, missing,
		 provider);
	ck_assert_msg(strncmp(err, want, strlen(want)) == 0, "got '%s'", err);
	ck_assert_msg(strstr(err, "No data available); try --protocol tcp"),
		      "got '%s'", err);
}

START_TEST(efa_absent_message)
{
	absent_or_opens("efa", "efa", "no EFA device");
}
END_TEST

START_TEST(rdma_fabric_absent_message)
{
	absent_or_opens("rdma-fabric", "verbs;ofi_rxm",
			"no RDMA device for libfabric verbs");
}
END_TEST

/* Raw verbs without a device: the line the notes ask for. */
START_TEST(rdma_absent_message)
{
	struct sfs_xport_cfg c = {.protocol = "rdma",
				  .role = SFS_XPORT_REPLICA,
				  .timeout_ms = 2000};
	struct sfs_xport *x = NULL;
	char err[SFS_XPORT_ERR_MAX] = "";
	int n = 0;
	struct ibv_device **d = ibv_get_device_list(&n);
	if (d)
		ibv_free_device_list(d);
	int rc = sfs_xport_open(&c, &x, err, sizeof(err));
	if (d && n > 0) {
		ck_assert_msg(rc == 0, "device present but: %s", err);
		sfs_xport_close(x);
		return;
	}
	ck_assert_int_ne(rc, 0);
	ck_assert_ptr_null(x);
	ck_assert_int_eq(lines(err), 1);
	ck_assert_msg(!strncmp(err,
			       "protocol rdma: no RDMA device "
			       "(ibv_get_device_list: ",
			       strlen("protocol rdma: no RDMA device "
				      "(ibv_get_device_list: ")),
		      "got '%s'", err);
	ck_assert_msg(strstr(err, "); try --protocol tcp"), "got '%s'", err);
}
END_TEST

START_TEST(auto_chooses_and_says_why)
{
	char path[] = "/tmp/sfs-xport-log.XXXXXX";
	int fd = mkstemp(path);
	ck_assert_int_ge(fd, 0);
	close(fd);
	ck_assert_int_eq(sfs_log_to_file(path), 0);

	struct sfs_xport_cfg c = {.protocol = "auto",
				  .role = SFS_XPORT_SEED,
				  .node = "127.0.0.1",
				  .timeout_ms = 2000};
	struct sfs_xport *x = NULL;
	struct sfs_xport_info in;
	char err[SFS_XPORT_ERR_MAX] = "", log[4096] = "";
	ck_assert_msg(sfs_xport_open(&c, &x, err, sizeof(err)) == 0, "%s", err);
	sfs_xport_info(x, &in);
	sfs_xport_close(x);

	FILE *f = fopen(path, "r");
	size_t n = fread(log, 1, sizeof(log) - 1, f);
	log[n] = '\0';
	fclose(f);
	unlink(path);
	char want[64];
	snprintf(want, sizeof(want), "protocol auto: chose %s", in.protocol);
	ck_assert_msg(strstr(log, want), "log: %s", log);
	if (!provider_present("efa")) {
		ck_assert_str_eq(in.protocol, "tcp");
		ck_assert_msg(strstr(log, "not available: protocol efa: no EFA "
					  "device"),
			      "log: %s", log);
		ck_assert_msg(strstr(log, "protocol rdma: no RDMA device"),
			      "log: %s", log);
	} else {
		ck_assert_str_eq(in.protocol, "efa");
	}
}
END_TEST

START_TEST(tcp_opens_and_describes)
{
	struct sfs_xport_cfg c = {.protocol = "tcp",
				  .role = SFS_XPORT_REPLICA,
				  .timeout_ms = 2000};
	struct sfs_xport *x = NULL;
	struct sfs_xport_info in;
	char err[SFS_XPORT_ERR_MAX];
	ck_assert_msg(sfs_xport_open(&c, &x, err, sizeof(err)) == 0, "%s", err);
	sfs_xport_info(x, &in);
	ck_assert_str_eq(in.protocol, "tcp");
	ck_assert_str_eq(in.provider, "tcp;ofi_rxm");
	ck_assert_uint_gt(in.addr_len, 0);
	ck_assert_uint_gt(in.max_msg_size, 0);
	ck_assert_uint_gt(strlen(in.mr_desc), 0);
	sfs_xport_close(x);
}
END_TEST

/*
 * Registration keys a reader without the manifest cannot guess: 64
 * regions registered on each protocol whose keys seedfs asks for (tcp,
 * sockets, shm; docs/security.md's table) get 64 distinct keys, and
 * every one of the 64 bit positions is set in some key and clear in
 * another (random keys miss that with odds of 64 * 2^-63).
 */
START_TEST(keys_random)
{
	static const char *const protos[] = {"tcp", "sockets", "shm"};
	enum { N = 64 };
	static char buf[N][64];
	for (size_t p = 0; p < sizeof(protos) / sizeof(protos[0]); p++) {
		struct sfs_xport_cfg c = {.protocol = protos[p],
					  .role = SFS_XPORT_SEED,
					  .timeout_ms = 2000};
		struct sfs_xport *x = NULL;
		struct sfs_xport_mr *mr[N];
		uint64_t keys[N], any = 0, all = ~0ull;
		int same = 0;
		char err[SFS_XPORT_ERR_MAX];
		if (sfs_xport_open(&c, &x, err, sizeof(err))) {
			ck_assert_msg(strcmp(protos[p], "tcp"), "%s", err);
			continue; /* sockets or shm not on this host */
		}
		for (int i = 0; i < N; i++) {
			uint64_t raddr;
			uint8_t raw[SFS_XPORT_RAWKEY_MAX];
			size_t raw_len = 0;
			ck_assert_int_eq(
				sfs_xport_mr_reg(x, buf[i], sizeof(buf[i]),
						 SFS_XPORT_REMOTE_READ, &mr[i]),
				0);
			sfs_xport_mr_export(mr[i], &raddr, &keys[i], raw,
					    &raw_len);
			ck_assert_uint_eq(raw_len, 0);
			any |= keys[i];
			all &= keys[i];
			for (int k = 0; k < i; k++)
				if (keys[k] == keys[i]) {
					printf("%s: regions %d and %d have one "
					       "key\n",
					       protos[p], k, i);
					same++;
				}
		}
		printf("%s: bits never set 0x%016llx, always set 0x%016llx in "
		       "%d keys\n",
		       protos[p], (unsigned long long)~any,
		       (unsigned long long)all, N);
		SFS_TEST_BOUND_EQ("key_pairs_equal", 0, same);
		SFS_TEST_BOUND_EQ("key_bits_never_set", 0,
				  __builtin_popcountll(~any));
		SFS_TEST_BOUND_EQ("key_bits_always_set", 0,
				  __builtin_popcountll(all));
		for (int i = 0; i < N; i++)
			sfs_xport_mr_dereg(mr[i]);
		sfs_xport_close(x);
	}
}
END_TEST

/* A fake fi_mr_map_raw: keys 100, 101, ...; counts what is mapped. */
struct fake_maps {
	uint64_t next;
	int maps, unmaps, live, fail;
	uint64_t unmapped[16];
};

static int fake_map(void *arg, uint64_t raddr, const uint8_t *raw, size_t len,
		    uint64_t *key)
{
	struct fake_maps *f = arg;
	(void)raddr;
	(void)raw;
	(void)len;
	if (f->fail)
		return -EIO;
	f->maps++;
	f->live++;
	*key = 100 + f->next++;
	return 0;
}

static void fake_unmap(void *arg, uint64_t key)
{
	struct fake_maps *f = arg;
	if (f->unmaps < 16)
		f->unmapped[f->unmaps] = key;
	f->unmaps++;
	f->live--;
}

/* Raw keys imported again and again (a re-seeder's slab key comes with
 * every holdings answer) share one mapping, and the last release undoes
 * it: a replica's mappings stay as many as the keys in use.  (Before,
 * each import made a mapping kept until the transport closed.) */
START_TEST(raw_keys_counted)
{
	struct fake_maps f = {0};
	struct sfs_rawkey_ops ops = {
		.map = fake_map, .unmap = fake_unmap, .arg = &f};
	struct sfs_rawkeys t = {0};
	const uint8_t slab[12] = "slab-key-123", other[12] = "other-key-12";
	uint64_t k1, k2, k3, k4;

	ck_assert_int_eq(sfs_rawkeys_get(&t, 0x1000, slab, 12, &ops, &k1), 0);
	ck_assert_int_eq(sfs_rawkeys_get(&t, 0x1000, slab, 12, &ops, &k2), 0);
	ck_assert_uint_eq(k1, k2);
	ck_assert_int_eq(f.maps, 1);
	/* Other bytes, or the same bytes at another address: another. */
	ck_assert_int_eq(sfs_rawkeys_get(&t, 0x1000, other, 12, &ops, &k3), 0);
	ck_assert_int_eq(sfs_rawkeys_get(&t, 0x2000, slab, 12, &ops, &k4), 0);
	ck_assert_int_eq(f.maps, 3);
	ck_assert_uint_ne(k3, k1);
	ck_assert_uint_ne(k4, k1);
	/* The first release keeps it (one import left), the second
	 * undoes it, a third is not ours. */
	ck_assert_int_eq(sfs_rawkeys_put(&t, k1, &ops), 0);
	ck_assert_int_eq(f.unmaps, 0);
	ck_assert_int_eq(sfs_rawkeys_put(&t, k1, &ops), 0);
	ck_assert_int_eq(f.unmaps, 1);
	ck_assert_uint_eq(f.unmapped[0], k1);
	ck_assert_int_eq(sfs_rawkeys_put(&t, k1, &ops), -ENOENT);
	ck_assert_int_eq(f.unmaps, 1);

	/* A replica's life: 10000 holdings answers of one re-seeder, each
	 * importing the slab key and giving back the last answer's. */
	uint64_t held, k;
	ck_assert_int_eq(sfs_rawkeys_get(&t, 0x9000, slab, 12, &ops, &held), 0);
	int before = f.maps;
	for (int i = 0; i < 10000; i++) {
		ck_assert_int_eq(
			sfs_rawkeys_get(&t, 0x9000, slab, 12, &ops, &k), 0);
		ck_assert_int_eq(sfs_rawkeys_put(&t, held, &ops), 0);
		held = k;
	}
	ck_assert_int_eq(f.maps, before); /* no new mapping */
	ck_assert_uint_eq(t.n, 3);	  /* other, 0x2000, the slab */
	ck_assert_int_eq(f.live, 3);

	/* A failed mapping records nothing; bad lengths are refused. */
	f.fail = 1;
	ck_assert_int_eq(sfs_rawkeys_get(&t, 0x5000, other, 12, &ops, &k),
			 -EIO);
	f.fail = 0;
	ck_assert_uint_eq(t.n, 3);
	ck_assert_int_eq(sfs_rawkeys_get(&t, 0x5000, other, 0, &ops, &k),
			 -EINVAL);
	uint8_t big[SFS_XPORT_RAWKEY_MAX + 1] = {0};
	ck_assert_int_eq(
		sfs_rawkeys_get(&t, 0x5000, big, sizeof(big), &ops, &k),
		-EINVAL);

	/* The transport closes: whatever is left is undone. */
	sfs_rawkeys_clear(&t, &ops);
	ck_assert_int_eq(f.live, 0);
	ck_assert_int_eq(f.maps, f.unmaps);
	ck_assert_uint_eq(t.n, 0);
	ck_assert_ptr_null(t.v);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("transport");
	TCase *t = tcase_create("select");
	tcase_set_timeout(t, 30);
	tcase_add_test(t, choose_precedence);
	tcase_add_test(t, raw_keys_counted);
	tcase_add_test(t, names);
	tcase_add_test(t, unknown_protocol_message);
	tcase_add_test(t, efa_absent_message);
	tcase_add_test(t, rdma_fabric_absent_message);
	tcase_add_test(t, rdma_absent_message);
	tcase_add_test(t, auto_chooses_and_says_why);
	tcase_add_test(t, tcp_opens_and_describes);
	tcase_add_test(t, keys_random);
	suite_add_tcase(s, t);
	return sfs_check_run(s);
}
