/* SPDX-License-Identifier: MIT */
/*
 * log.h - one logging macro for every subsystem of seedfs.
 *
 *   SFS_LOG(SFS_WARN, "xport", "fi_read failed: %s", fi_strerror(-rc));
 *
 * A message below the current level costs one predictable branch: its
 * arguments are not evaluated.  Output goes to stderr (default), a file
 * or syslog; each line carries time, pid, level and subsystem.
 */
#ifndef SFS_LOG_H
#define SFS_LOG_H

enum sfs_log_level {
	SFS_ERR = 0,
	SFS_WARN = 1,
	SFS_INFO = 2,
	SFS_DEBUG = 3,
};

/* Current level; written only by sfs_log_init/sfs_log_set_level. */
extern int sfs_log_level;

#define SFS_LOG(lvl, subsys, ...)                                              \
	do {                                                                   \
		if ((lvl) <= sfs_log_level)                                    \
			sfs_log_write((lvl), (subsys), __VA_ARGS__);           \
	} while (0)

/*
 * sfs_log_write - format and emit one line.  Thread safe (one write(2)
 * per line).  Use SFS_LOG rather than calling this directly.
 */
void sfs_log_write(int lvl, const char *subsys, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/*
 * sfs_log_set_level - set the level from a name: err, warn, info, debug.
 * Returns 0 or -EINVAL for an unknown name.  Not thread safe: call at
 * start-up.
 */
int sfs_log_set_level(const char *name);

/*
 * sfs_log_set_format - "text" (the default: time pid level subsystem:
 * message) or "json" (one object a line: time, program, pid, level,
 * subsystem, msg; for log shippers; syslog stays text).  Returns 0 or
 * -EINVAL.  Not thread safe: call at start-up.
 */
int sfs_log_set_format(const char *name);

/*
 * sfs_log_to_file - send lines to @path (appended, created 0644).
 * Returns 0 or -errno.  sfs_log_to_syslog - send lines to syslog(3)
 * under @ident [borrowed, must outlive logging].  Not thread safe: call
 * at start-up or before daemonizing.
 */
int sfs_log_to_file(const char *path);
void sfs_log_to_syslog(const char *ident);

/* sfs_log_program - prefix used on stderr lines ("seedfs" by default). */
void sfs_log_program(const char *name);

#endif /* SFS_LOG_H */
