/* SPDX-License-Identifier: MIT */
#include "log.h"

#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <syslog.h>
#include <time.h>
#include <unistd.h>

int sfs_log_level = SFS_INFO;

static int log_fd = STDERR_FILENO;
static int log_syslog;
static int log_json;
static const char *log_prog = "seedfs";

static const char level_char[] = {'E', 'W', 'I', 'D'};
static const char *const level_name[] = {"err", "warn", "info", "debug"};

/*
 * @src as the inside of a JSON string into @dst (@cap bytes, always
 * terminated): quotes, backslashes and control characters escaped,
 * valid UTF-8 kept, any other byte as U+FFFD.  Returns the length.
 */
static size_t json_escape(const char *src, char *dst, size_t cap)
{
	const unsigned char *p = (const unsigned char *)src;
	size_t o = 0;

	while (*p && o + 7 < cap) {
		unsigned char c = *p;
		size_t n = c < 0x80		? 1
			   : (c & 0xe0) == 0xc0 ? 2
			   : (c & 0xf0) == 0xe0 ? 3
			   : (c & 0xf8) == 0xf0 ? 4
						: 0;
		int ok = n > 0 && !(n == 2 && c < 0xc2) && !(c > 0xf4);
		for (size_t k = 1; ok && k < n; k++)
			ok = (p[k] & 0xc0) == 0x80;
		if (!ok) {
			memcpy(dst + o, "\\ufffd", 6);
			o += 6;
			p++;
		} else if (c == '"' || c == '\\') {
			dst[o++] = '\\';
			dst[o++] = (char)c;
			p++;
		} else if (c < 0x20) {
			o += (size_t)snprintf(dst + o, cap - o, "\\u%04x", c);
			p++;
		} else {
			memcpy(dst + o, p, n);
			o += n;
			p += n;
		}
	}
	dst[o] = '\0';
	return o;
}

void sfs_log_write(int lvl, const char *subsys, const char *fmt, ...)
{
	char msg[1024];
	char line[2300];
	va_list ap;
	int n;

	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);

	if (lvl < SFS_ERR)
		lvl = SFS_ERR;
	if (lvl > SFS_DEBUG)
		lvl = SFS_DEBUG;

	/* One line each: a name or a message that came from the network
	 * or from disk may hold a newline (a forged line), a terminal's
	 * escape sequence or bytes that are not UTF-8.  Text lines carry it
	 * escaped (sfs_escape); JSON lines as JSON escapes. */
	char esc[2 * sizeof(msg)];
	sfs_escape(msg, strlen(msg), esc, sizeof(esc));

	if (log_syslog) {
		static const int prio[] = {LOG_ERR, LOG_WARNING, LOG_INFO,
					   LOG_DEBUG};
		syslog(prio[lvl], "%s: %s", subsys, esc);
		return;
	}

	struct timespec ts;
	struct tm tm;
	clock_gettime(CLOCK_REALTIME, &ts);
	gmtime_r(&ts.tv_sec, &tm);
	if (log_json) {
		char jesc[2400], big[2600];
		json_escape(msg, jesc, sizeof(jesc));
		n = snprintf(
			big, sizeof(big),
			"{\"time\":\"%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ\","
			"\"program\":\"%s\",\"pid\":%d,\"level\":\"%s\","
			"\"subsystem\":\"%s\",\"msg\":\"%s\"}\n",
			tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday,
			tm.tm_hour, tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000,
			log_prog, (int)getpid(), level_name[lvl], subsys, jesc);
		if (n > 0 && (size_t)n < sizeof(big))
			(void)!write(log_fd, big, (size_t)n);
		return;
	}
	n = snprintf(line, sizeof(line),
		     "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ %s[%d] %c %s: %s\n",
		     tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour,
		     tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000, log_prog,
		     (int)getpid(), level_char[lvl], subsys, esc);
	if (n < 0)
		return;
	if ((size_t)n >= sizeof(line)) {
		n = sizeof(line) - 1;
		line[n - 1] = '\n';
	}
	/* One write per line keeps concurrent lines whole. */
	if (write(log_fd, line, (size_t)n) < 0)
		return;
}

int sfs_log_set_level(const char *name)
{
	for (int i = 0; i < 4; i++) {
		if (strcasecmp(name, level_name[i]) == 0) {
			sfs_log_level = i;
			return 0;
		}
	}
	return -EINVAL;
}

int sfs_log_set_format(const char *name)
{
	if (!strcmp(name, "text") || !strcmp(name, "json")) {
		log_json = name[0] == 'j';
		return 0;
	}
	return -EINVAL;
}

int sfs_log_to_file(const char *path)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
	if (fd < 0)
		return -errno;
	if (log_fd != STDERR_FILENO)
		close(log_fd);
	log_fd = fd;
	log_syslog = 0;
	return 0;
}

void sfs_log_to_syslog(const char *ident)
{
	openlog(ident, LOG_PID, LOG_DAEMON);
	log_syslog = 1;
}

void sfs_log_program(const char *name)
{
	log_prog = name;
}
