/* SPDX-License-Identifier: MIT */
/*
 * hellos - connect to a raw verbs seed many times, for tests of the
 * seed's queue pair limits.
 *
 *   hellos HOST:PORT N [hold]
 *
 * Makes N connections (POST /v1/connect, one queue pair each side) from
 * one transport.  Prints "ok K refused R" and, when some were refused,
 * the last reason on the next line.  With "hold" it then waits for
 * SIGTERM with its queue pairs up; otherwise it exits at once, and its
 * queue pairs go with the process, unannounced: to the seed these are
 * replicas that went away.
 */
#include "control/control.h"
#include "metadata/manifest.h"
#include "transports/transport.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	char err[SFS_XPORT_ERR_MAX] = "", last[SFS_XPORT_ERR_MAX] = "", *json;
	struct sfs_manifest *m;
	struct sfs_xport *x;
	size_t len;

	if (argc < 3) {
		fprintf(stderr, "usage: hellos HOST:PORT N [hold]\n");
		return 2;
	}
	sfs_control_init();
	if (sfs_control_get(NULL, argv[1], "/v1/manifest", 10000,
			    SFS_MANIFEST_MAX, &json, &len, err, sizeof(err)) ||
	    sfs_manifest_decode(json, len, &m, err, sizeof(err))) {
		fprintf(stderr, "hellos: %s\n", err);
		return 1;
	}
	ssize_t ep = sfs_manifest_endpoint(m, "rdma");
	struct sfs_xport_cfg c = {.protocol = "rdma",
				  .role = SFS_XPORT_REPLICA,
				  .timeout_ms = 10000};
	if (ep < 0 || sfs_xport_open(&c, &x, err, sizeof(err))) {
		fprintf(stderr, "hellos: %s\n",
			ep < 0 ? "no rdma endpoint" : err);
		return 1;
	}
	int n = atoi(argv[2]), ok = 0, refused = 0;
	for (int i = 0; i < n; i++) {
		uint64_t peer;
		if (sfs_control_connect_peer(NULL, argv[1], x, &m->eps[ep],
					     10000, &peer, err, sizeof(err))) {
			refused++;
			snprintf(last, sizeof(last), "%s", err);
		} else {
			ok++;
		}
	}
	printf("ok %d refused %d\n", ok, refused);
	if (refused)
		printf("%s\n", last);
	fflush(stdout);
	if (argc > 3 && !strcmp(argv[3], "hold"))
		pause();
	_exit(0); /* the queue pairs go with the process */
}
