/* SPDX-License-Identifier: MIT */
#include "util.h"

#include <ctype.h>
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>

uint64_t sfs_now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

struct timespec sfs_abstime(uint64_t ms)
{
	uint64_t t = sfs_now_ns() + ms * 1000000u;
	struct timespec ts = {.tv_sec = (time_t)(t / 1000000000u),
			      .tv_nsec = (long)(t % 1000000000u)};
	return ts;
}

int64_t sfs_timespec_ns(struct timespec ts)
{
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

struct timespec sfs_ns_timespec(int64_t ns)
{
	struct timespec t = {.tv_sec = (time_t)(ns / 1000000000),
			     .tv_nsec = (long)(ns % 1000000000)};
	if (t.tv_nsec < 0) {
		t.tv_sec--;
		t.tv_nsec += 1000000000;
	}
	return t;
}

int sfs_rwlock_init_writer(pthread_rwlock_t *l)
{
	pthread_rwlockattr_t a;
	int rc = pthread_rwlockattr_init(&a);
	if (rc)
		return -rc;
	rc = pthread_rwlockattr_setkind_np(
		&a, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
	if (!rc)
		rc = pthread_rwlock_init(l, &a);
	pthread_rwlockattr_destroy(&a);
	return -rc;
}

int sfs_cond_init(pthread_cond_t *c)
{
	pthread_condattr_t a;
	int rc = pthread_condattr_init(&a);
	if (rc)
		return -rc;
	rc = pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
	if (!rc)
		rc = pthread_cond_init(c, &a);
	pthread_condattr_destroy(&a);
	return -rc;
}

int sfs_parse_hostport(const char *s, char *host, size_t hostlen, char *port,
		       size_t portlen)
{
	const char *colon, *h = s;
	size_t hl;

	if (s[0] == '[') {
		const char *end = strchr(s, ']');
		if (!end || end[1] != ':')
			return -EINVAL;
		h = s + 1;
		hl = (size_t)(end - h);
		colon = end + 1;
	} else {
		colon = strrchr(s, ':');
		if (!colon || memchr(s, ':', (size_t)(colon - s)))
			return -EINVAL;
		hl = (size_t)(colon - s);
	}
	const char *p = colon + 1;
	size_t pl = strlen(p);
	if (pl == 0 || pl >= portlen || hl >= hostlen)
		return -EINVAL;
	for (size_t i = 0; i < pl; i++)
		if (!isdigit((unsigned char)p[i]))
			return -EINVAL;
	if (strtoul(p, NULL, 10) > 65535)
		return -EINVAL;
	/* A name or an address, nothing a URL would read as more (these
	 * come from the network too: announcements, registry records). */
	for (size_t i = 0; i < hl; i++) {
		unsigned char c = (unsigned char)h[i];
		if (!isalnum(c) && c != '.' && c != '-' && c != '_' &&
		    !(s[0] == '[' && (c == ':' || c == '%')))
			return -EINVAL;
	}
	memcpy(host, h, hl);
	host[hl] = '\0';
	memcpy(port, p, pl + 1);
	return 0;
}

int sfs_parse_u64(const char *s, uint64_t *out)
{
	char *end;
	int base = 10;

	if (!s || !*s || *s == '-' || *s == '+' || isspace((unsigned char)*s))
		return -EINVAL;
	if (s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
		base = 16;
		s += 2;
		if (!isxdigit((unsigned char)*s))
			return -EINVAL;
	}
	errno = 0;
	unsigned long long v = strtoull(s, &end, base);
	if (errno == ERANGE)
		return -ERANGE;
	if (end == s || *end)
		return -EINVAL;
	*out = v;
	return 0;
}

int sfs_parse_size(const char *s, uint64_t *out)
{
	char *end;
	unsigned shift = 0;

	if (!s || !isdigit((unsigned char)*s))
		return -EINVAL;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno == ERANGE)
		return -ERANGE;
	switch (*end) {
	case 'k':
	case 'K':
		shift = 10;
		end++;
		break;
	case 'm':
	case 'M':
		shift = 20;
		end++;
		break;
	case 'g':
	case 'G':
		shift = 30;
		end++;
		break;
	case 't':
	case 'T':
		shift = 40;
		end++;
		break;
	default:
		break;
	}
	if (shift && *end == 'i')
		end++;
	if (*end == 'B' || *end == 'b')
		end++;
	if (*end)
		return -EINVAL;
	if (shift && v > (UINT64_MAX >> shift))
		return -ERANGE;
	*out = (uint64_t)v << shift;
	return 0;
}

static const char b64_alpha[] =
	"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

size_t sfs_b64_enc_len(size_t n)
{
	return (n + 2) / 3 * 4 + 1;
}

void sfs_b64_encode(const void *src, size_t n, char *dst)
{
	const unsigned char *s = src;
	size_t i;

	for (i = 0; i + 2 < n; i += 3) {
		uint32_t v = (uint32_t)s[i] << 16 | (uint32_t)s[i + 1] << 8 |
			     s[i + 2];
		*dst++ = b64_alpha[v >> 18];
		*dst++ = b64_alpha[(v >> 12) & 63];
		*dst++ = b64_alpha[(v >> 6) & 63];
		*dst++ = b64_alpha[v & 63];
	}
	if (i < n) {
		uint32_t v = (uint32_t)s[i] << 16;
		if (i + 1 < n)
			v |= (uint32_t)s[i + 1] << 8;
		*dst++ = b64_alpha[v >> 18];
		*dst++ = b64_alpha[(v >> 12) & 63];
		*dst++ = i + 1 < n ? b64_alpha[(v >> 6) & 63] : '=';
		*dst++ = '=';
	}
	*dst = '\0';
}

static int b64_val(char c)
{
	if (c >= 'A' && c <= 'Z')
		return c - 'A';
	if (c >= 'a' && c <= 'z')
		return c - 'a' + 26;
	if (c >= '0' && c <= '9')
		return c - '0' + 52;
	if (c == '+')
		return 62;
	if (c == '/')
		return 63;
	return -1;
}

int sfs_b64_decode(const char *src, size_t len, void *dst, size_t *outlen)
{
	unsigned char *d = dst;
	size_t o = 0;

	if (len % 4)
		return -EINVAL;
	for (size_t i = 0; i < len; i += 4) {
		int v[4], pad = 0;
		for (int k = 0; k < 4; k++) {
			char c = src[i + k];
			if (c == '=' && i + 4 == len && k >= 2) {
				v[k] = 0;
				pad++;
				continue;
			}
			if (pad) /* data after '=' */
				return -EINVAL;
			v[k] = b64_val(c);
			if (v[k] < 0)
				return -EINVAL;
		}
		uint32_t w = (uint32_t)v[0] << 18 | (uint32_t)v[1] << 12 |
			     (uint32_t)v[2] << 6 | (uint32_t)v[3];
		/* Canonical form: unused trailing bits must be zero. */
		if ((pad == 1 && (w & 0xff)) || (pad == 2 && (w & 0xffff)))
			return -EINVAL;
		d[o++] = (unsigned char)(w >> 16);
		if (pad < 2)
			d[o++] = (unsigned char)(w >> 8);
		if (pad < 1)
			d[o++] = (unsigned char)w;
	}
	*outlen = o;
	return 0;
}

void sfs_hex_encode(const void *src, size_t n, char *dst)
{
	static const char hx[] = "0123456789abcdef";
	const unsigned char *s = src;
	for (size_t i = 0; i < n; i++) {
		*dst++ = hx[s[i] >> 4];
		*dst++ = hx[s[i] & 15];
	}
	*dst = '\0';
}

int sfs_hex_val(char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

int sfs_hex_decode(const char *src, void *dst, size_t cap, size_t *outlen)
{
	size_t n = strlen(src);
	unsigned char *d = dst;

	if (n % 2 || n / 2 > cap)
		return -EINVAL;
	for (size_t i = 0; i < n; i += 2) {
		int hi = sfs_hex_val(src[i]), lo = sfs_hex_val(src[i + 1]);
		if (hi < 0 || lo < 0)
			return -EINVAL;
		d[i / 2] = (unsigned char)(hi << 4 | lo);
	}
	*outlen = n / 2;
	return 0;
}

char *sfs_fmt_bytes(uint64_t n, char *buf, size_t len)
{
	static const char *const unit[] = {"B", "KiB", "MiB", "GiB", "TiB"};
	double v = (double)n;
	unsigned u = 0;
	while (v >= 1024 && u + 1 < SFS_ARRAY_SIZE(unit)) {
		v /= 1024;
		u++;
	}
	if (u == 0)
		snprintf(buf, len, "%" PRIu64 " B", n);
	else
		snprintf(buf, len, "%.1f %s", v, unit[u]);
	return buf;
}

int sfs_grow(void **p, size_t *cap, size_t need, size_t elem)
{
	if (need <= *cap)
		return 0;
	size_t n = *cap ? *cap : 8;
	while (n < need) {
		if (n > SIZE_MAX / 2)
			return -ENOMEM;
		n *= 2;
	}
	if (n > SIZE_MAX / elem)
		return -ENOMEM;
	void *q = realloc(*p, n * elem);
	if (!q)
		return -ENOMEM;
	*p = q;
	*cap = n;
	return 0;
}

char *sfs_fmt_size_limit(uint64_t n, char *buf, size_t len)
{
	if (n >= (1ull << 62)) {
		snprintf(buf, len, "unlimited");
		return buf;
	}
	return sfs_fmt_bytes(n, buf, len);
}

int sfs_fail(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
	return -EINVAL;
}

mode_t sfs_umask(void)
{
	char line[128];
	unsigned int v;
	int found = 0;
	FILE *f = fopen("/proc/self/status", "re");
	while (f && !found && fgets(line, sizeof(line), f))
		found = sscanf(line, "Umask: %o", &v) == 1;
	if (f)
		fclose(f);
	if (found)
		return (mode_t)(v & 0777);
	mode_t m = umask(077);
	umask(m);
	return m;
}

void sfs_raise_nofile(void)
{
	struct rlimit rl;
	if (!getrlimit(RLIMIT_NOFILE, &rl) && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
}

static pthread_mutex_t kept_lock = PTHREAD_MUTEX_INITIALIZER;
static void **kept;
static size_t nkept, cap_kept;

void sfs_keep_forever(void *p)
{
	pthread_mutex_lock(&kept_lock);
	if (!sfs_grow((void **)&kept, &cap_kept, nkept + 1, sizeof(*kept)))
		kept[nkept++] = p;
	pthread_mutex_unlock(&kept_lock);
}

char *sfs_url_escape(const char *s)
{
	size_t n = strlen(s);
	char *out = malloc(3 * n + 1), *o = out;
	if (!out)
		return NULL;
	for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
		if ((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') ||
		    (*p >= '0' && *p <= '9') || strchr("._~-", *p)) {
			*o++ = (char)*p;
			continue;
		}
		o += sprintf(o, "%%%02X", *p);
	}
	*o = '\0';
	return out;
}

/* The length of the valid UTF-8 character at @p (@n bytes left), or 0. */
static size_t utf8_len(const unsigned char *p, size_t n)
{
	unsigned char c = p[0];
	size_t len = c < 0x80	? 1
		     : c < 0xc2 ? 0
		     : c < 0xe0 ? 2
		     : c < 0xf0 ? 3
		     : c < 0xf5 ? 4
				: 0;
	if (!len || len > n)
		return 0;
	for (size_t k = 1; k < len; k++)
		if ((p[k] & 0xc0) != 0x80)
			return 0;
	if ((c == 0xe0 && p[1] < 0xa0) ||  /* overlong */
	    (c == 0xed && p[1] >= 0xa0) || /* a surrogate */
	    (c == 0xf0 && p[1] < 0x90) ||  /* overlong */
	    (c == 0xf4 && p[1] >= 0x90))   /* past U+10FFFF */
		return 0;
	return len;
}

/* Whether the valid UTF-8 character of @len bytes at @p is escaped: a
 * C0 or C1 control, DEL, or a line or paragraph separator. */
static int unprintable(const unsigned char *p, size_t len)
{
	return (len == 1 && (p[0] < 0x20 || p[0] == 0x7f)) ||
	       (len == 2 && p[0] == 0xc2 && p[1] < 0xa0) ||
	       (len == 3 && p[0] == 0xe2 && p[1] == 0x80 &&
		(p[2] == 0xa8 || p[2] == 0xa9));
}

size_t sfs_unprintable(const char *s, size_t n)
{
	const unsigned char *p = (const unsigned char *)s;
	for (size_t i = 0; i < n;) {
		size_t len = utf8_len(p + i, n - i);
		if (!len || unprintable(p + i, len))
			return i;
		i += len;
	}
	return n;
}

char *sfs_escape(const char *s, size_t n, char *out, size_t outlen)
{
	const unsigned char *p = (const unsigned char *)s;
	size_t o = 0, i = 0, cut = 0;

	if (!outlen)
		return out;
	while (i < n) {
		char e[16];
		size_t len = utf8_len(p + i, n - i), el = 0;
		if (!len) {
			len = 1; /* not UTF-8: the byte */
			el = (size_t)snprintf(e, sizeof(e), "\\x%02x", p[i]);
		} else if (len > 1 && unprintable(p + i, len)) {
			for (size_t k = 0; k < len; k++)
				el += (size_t)snprintf(e + el, sizeof(e) - el,
						       "\\x%02x", p[i + k]);
		} else if (p[i] == '\n' || p[i] == '\r' || p[i] == '\t' ||
			   p[i] == '\\') {
			e[0] = '\\';
			e[1] = p[i] == '\n'   ? 'n'
			       : p[i] == '\r' ? 'r'
			       : p[i] == '\t' ? 't'
					      : '\\';
			el = 2;
		} else if (p[i] < 0x20 || p[i] == 0x7f) {
			el = (size_t)snprintf(e, sizeof(e), "\\x%02x", p[i]);
		} else {
			memcpy(e, p + i, len);
			el = len;
		}
		if (o + el >= outlen) {
			/* Full: back to the last boundary that leaves room
			 * for "...": a cut never splits a character or an
			 * escape. */
			o = cut;
			if (o + 3 < outlen) {
				memcpy(out + o, "...", 3);
				o += 3;
			}
			break;
		}
		memcpy(out + o, e, el);
		o += el;
		i += len;
		if (o + 3 < outlen)
			cut = o;
	}
	out[o] = '\0';
	return out;
}
