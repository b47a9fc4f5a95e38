/* SPDX-License-Identifier: MIT */
/*
 * fabcap.h - caps on the connections libfabric's listeners accept
 * (fabcap.c says why and how).  Only transports/fabric*.c include
 * this; the counters are in transport.h (sfs_xport_listen_stats).
 */
#ifndef SFS_FABCAP_H
#define SFS_FABCAP_H

#include <stddef.h>

/*
 * fab_cap_listen - an endpoint whose listener has the local socket
 * address @addr (@len bytes) is open: connections to it are capped from
 * now on.  @tcp: the tcp provider's (its connections are also made
 * non-blocking and reset when no connection request comes).  Counted:
 * each call is undone by one fab_cap_unlisten.  Thread safe.
 */
void fab_cap_listen(const void *addr, size_t len, int tcp);
void fab_cap_unlisten(const void *addr, size_t len);

/* fab_cap_tick - the periodic check (connections that sent no request,
 * closed ones forgotten, the log), at most once a second in the
 * process: called by the progress threads.  Never waits for a lock. */
void fab_cap_tick(void);

#endif /* SFS_FABCAP_H */
