/* SPDX-License-Identifier: MIT */
#include "control.h"

#include <curl/curl.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct body {
	char *buf;
	size_t len, cap, limit;
	int too_big;
};

static size_t on_data(char *p, size_t size, size_t n, void *arg)
{
	struct body *b = arg;
	size_t k = size * n;

	if (b->len + k > b->limit) {
		b->too_big = 1;
		return 0; /* aborts the transfer */
	}
	if (b->len + k + 1 > b->cap) {
		size_t cap = b->cap ? b->cap : 65536;
		while (cap < b->len + k + 1)
			cap *= 2;
		char *q = realloc(b->buf, cap);
		if (!q)
			return 0;
		b->buf = q;
		b->cap = cap;
	}
	memcpy(b->buf + b->len, p, k);
	b->len += k;
	b->buf[b->len] = '\0';
	return k;
}

int sfs_control_init(void)
{
	return curl_global_init(CURL_GLOBAL_DEFAULT) ? -EIO : 0;
}

int sfs_control_get(const char *hostport, const char *path,
		    unsigned int timeout_ms, size_t cap, char **body,
		    size_t *len, char *err, size_t errlen)
{
	struct body b = {.limit = cap};
	char url[600], cerr[CURL_ERROR_SIZE] = "";
	long code = 0;
	CURLcode cc;
	CURL *h;

	snprintf(url, sizeof(url), "http://%s%s", hostport, path);
	if (!(h = curl_easy_init()))
		return -ENOMEM;
	curl_easy_setopt(h, CURLOPT_URL, url);
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, (long)timeout_ms);
	curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, (long)timeout_ms);
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_data);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, &b);
	curl_easy_setopt(h, CURLOPT_ERRORBUFFER, cerr);
	curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http");
	curl_easy_setopt(h, CURLOPT_PROXY, ""); /* never via a proxy */
	cc = curl_easy_perform(h);
	curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
	curl_easy_cleanup(h);

	int rc = 0;
	if (b.too_big) {
		snprintf(err, errlen, "%s: response larger than %zu bytes", url,
			 cap);
		rc = -E2BIG;
	} else if (cc != CURLE_OK) {
		snprintf(err, errlen, "%s: %s", url,
			 *cerr ? cerr : curl_easy_strerror(cc));
		rc = cc == CURLE_OPERATION_TIMEDOUT ? -ETIMEDOUT
		     : cc == CURLE_COULDNT_CONNECT  ? -ECONNREFUSED
						    : -EIO;
	} else if (code != 200) {
		snprintf(err, errlen, "%s: HTTP status %ld", url, code);
		rc = -EPROTO;
	} else if (!b.buf) {
		snprintf(err, errlen, "%s: empty response", url);
		rc = -EPROTO;
	}
	if (rc) {
		free(b.buf);
		return rc;
	}
	*body = b.buf;
	*len = b.len;
	return 0;
}
