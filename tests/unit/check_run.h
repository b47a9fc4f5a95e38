/* SPDX-License-Identifier: MIT */
/* check_run.h - run one Check suite; the exit status of a test binary. */
#ifndef SFS_CHECK_RUN_H
#define SFS_CHECK_RUN_H

#include <check.h>

static inline int sfs_check_run(Suite *s)
{
	SRunner *r = srunner_create(s);
	srunner_run_all(r, CK_NORMAL);
	int failed = srunner_ntests_failed(r);
	srunner_free(r);
	return failed ? 1 : 0;
}

#endif /* SFS_CHECK_RUN_H */
