/* SPDX-License-Identifier: MIT */
/*
 * notify.h - tell a service manager how we are (systemd's Type=notify,
 * through libsystemd's sd_notify; nothing happens without
 * $NOTIFY_SOCKET).  The status is what `systemctl status` shows: the
 * same words as the ready line.
 *
 * Thread safe; errors are logged once at debug level and otherwise
 * ignored (a manager that cannot be told is not a reason to stop).
 */
#ifndef SFS_NOTIFY_H
#define SFS_NOTIFY_H

/* READY=1 and STATUS=@status: serving (or serving again after a reload). */
void sfs_notify_ready(const char *status);

/* RELOADING=1 (SIGHUP: republishing), with the monotonic time. */
void sfs_notify_reloading(void);

/* STOPPING=1. */
void sfs_notify_stopping(void);

#endif /* SFS_NOTIFY_H */
