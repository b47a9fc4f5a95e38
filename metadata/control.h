/* SPDX-License-Identifier: MIT */
/*
 * control.h - talk to a seed's control port (HTTP/1.1).
 */
#ifndef SFS_CONTROL_H
#define SFS_CONTROL_H

#include <stddef.h>

/*
 * sfs_control_get - GET http://@hostport@path within @timeout_ms,
 * refusing bodies over @cap bytes.  *body [new, NUL-terminated, free()].
 * Returns 0, or -errno with one line in @err (connection refused,
 * timeout, HTTP status, size).  Thread safe once sfs_control_init ran.
 */
int sfs_control_get(const char *hostport, const char *path,
		    unsigned int timeout_ms, size_t cap, char **body,
		    size_t *len, char *err, size_t errlen);

/* sfs_control_init - process-wide setup; call once before threads. */
int sfs_control_init(void);

#endif /* SFS_CONTROL_H */
