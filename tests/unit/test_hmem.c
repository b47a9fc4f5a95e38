/* SPDX-License-Identifier: MIT */
/*
 * Unit tests around EFA and GPU memory, which cannot run on this host:
 * the FI_EFA_USE_DEVICE_RDMA policy against *simulated* device
 * capabilities (no EFA hardware here), the real EFA query (finds none
 * here), and registering CUDA memory: its errors in this build (without
 * CUDA: how to build it; with CUDA but no driver or GPU: which).
 */
#include "check_run.h"

#include "transports/efa.h"
#include "transports/transport.h"

#include <check.h>
#include <errno.h>
#include <rdma/fabric.h>
#include <stdlib.h>
#include <string.h>

static char err[512];

START_TEST(efa_simulated_no_rdma_read_refuses_forced_device_rdma)
{
	struct sfs_efa_caps c = {.devices = 1, .name = "efa_0", .rdma_read = 0};
	static const char *const on[] = {"1", "true", "TRUE", "yes", "on"};
	for (size_t i = 0; i < sizeof(on) / sizeof(on[0]); i++) {
		err[0] = '\0';
		ck_assert_int_eq(sfs_efa_env_check(&c, on[i], err, sizeof(err)),
				 -EINVAL);
		ck_assert_msg(
			strstr(err, "protocol efa: FI_EFA_USE_DEVICE_RDMA=") &&
				strstr(err, "device efa_0 has no RDMA read "
					    "(efadv_query_device); unset "
					    "it"),
			"got '%s'", err);
	}
	static const char *const off[] = {"0", "false", "no", "off", ""};
	for (size_t i = 0; i < sizeof(off) / sizeof(off[0]); i++)
		ck_assert_int_eq(
			sfs_efa_env_check(&c, off[i], err, sizeof(err)), 0);
	ck_assert_int_eq(sfs_efa_env_check(&c, NULL, err, sizeof(err)), 0);
}
END_TEST

START_TEST(efa_simulated_rdma_read_allows_device_rdma)
{
	struct sfs_efa_caps c = {.devices = 2,
				 .name = "efa_0",
				 .rdma_read = 1,
				 .max_rdma_size = 1 << 30};
	ck_assert_int_eq(sfs_efa_env_check(&c, "1", err, sizeof(err)), 0);
}
END_TEST

START_TEST(efa_query_on_this_host)
{
	struct sfs_efa_caps c;
	ck_assert_int_eq(sfs_efa_query(&c), 0);
	struct fi_info *h = fi_allocinfo(), *i = NULL;
	h->fabric_attr->prov_name = strdup("efa");
	int have = fi_getinfo(FI_VERSION(1, 14), NULL, NULL, 0, h, &i) == 0;
	fi_freeinfo(h);
	fi_freeinfo(i);
	if (!have) {
		ck_assert_int_eq(c.devices, 0);
		ck_assert_int_eq(c.rdma_read, 0);
		/* Without a device nothing is refused: fi_getinfo says why. */
		ck_assert_int_eq(sfs_efa_env_check(&c, "1", err, sizeof(err)),
				 0);
	} else {
		ck_assert_int_gt(c.devices, 0);
	}
}
END_TEST

START_TEST(cuda_registration_errors)
{
	struct sfs_xport_cfg cfg = {
		.protocol = "tcp", .role = SFS_XPORT_SEED, .timeout_ms = 2000};
	struct sfs_xport *x;
	struct sfs_xport_mr *mr = NULL;
	static char host[4096];
	ck_assert_int_eq(sfs_xport_open(&cfg, &x, err, sizeof(err)), 0);
	err[0] = '\0';
	int rc = sfs_xport_mr_reg_cuda(x, host, sizeof(host),
				       SFS_XPORT_REMOTE_READ, &mr, err,
				       sizeof(err));
	ck_assert_ptr_null(mr);
#ifndef SEEDFS_WITH_CUDA
	ck_assert_int_eq(rc, -EOPNOTSUPP);
	ck_assert_msg(strstr(err, "built without CUDA support; build it with "
				  "cmake -DSEEDFS_CUDA=ON"),
		      "got '%s'", err);
#else
	/* No driver here: ENODEV; a driver but host memory: EINVAL. */
	ck_assert_msg(rc == -ENODEV || rc == -EINVAL, "rc %d: %s", rc, err);
	ck_assert_msg(strstr(err, rc == -ENODEV ? "no CUDA driver"
						: "is not CUDA device memory"),
		      "got '%s'", err);
#endif
	sfs_xport_close(x);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("hmem");
	TCase *t = tcase_create("efa+cuda");
	tcase_set_timeout(t, 30);
	tcase_add_test(t,
		       efa_simulated_no_rdma_read_refuses_forced_device_rdma);
	tcase_add_test(t, efa_simulated_rdma_read_allows_device_rdma);
	tcase_add_test(t, efa_query_on_this_host);
	tcase_add_test(t, cuda_registration_errors);
	suite_add_tcase(s, t);
	return sfs_check_run(s);
}
