/* SPDX-License-Identifier: MIT */
/* notify.c - sd_notify for Type=notify units (notify.h). */
#include "common/notify.h"

#include "common/log.h"
#include "common/util.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <systemd/sd-daemon.h>

static void say(const char *what, const char *text)
{
	int rc = sd_notify(0, text);
	if (rc < 0)
		SFS_LOG(SFS_DEBUG, "notify", "%s: %s", what, strerror(-rc));
}

void sfs_notify_ready(const char *status)
{
	char buf[1200];
	/* One line: a status is shown as it is. */
	snprintf(buf, sizeof(buf), "READY=1\nSTATUS=%.*s", 1100,
		 status ? status : "ready");
	for (char *p = buf + 8; *p; p++)
		if (*p == '\n')
			*p = ' ';
	say("READY", buf);
}

void sfs_notify_reloading(void)
{
	char buf[96];
	snprintf(buf, sizeof(buf), "RELOADING=1\nMONOTONIC_USEC=%" PRIu64,
		 sfs_now_ns() / 1000);
	say("RELOADING", buf);
}

void sfs_notify_stopping(void)
{
	say("STOPPING", "STOPPING=1");
}
