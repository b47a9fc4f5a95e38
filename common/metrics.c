/* SPDX-License-Identifier: MIT */
/*
 * metrics.c - Prometheus text exposition (metrics.h) on a memstream.
 */
#include "common/metrics.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

const double sfs_hist_bounds[SFS_HIST_NB] = {
	0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
	0.05,	0.1,	 0.25,	 0.5,	1,	2.5,   5,    10,
};

struct sfs_metrics {
	FILE *f;
	char *buf;
	size_t len;
};

void sfs_hist_observe(struct sfs_hist *h, uint64_t us)
{
	size_t i = 0;
	while (i < SFS_HIST_NB && (double)us > sfs_hist_bounds[i] * 1e6)
		i++;
	h->bucket[i]++;
	h->count++;
	h->sum_us += us;
}

struct sfs_metrics *sfs_metrics_new(void)
{
	struct sfs_metrics *m = calloc(1, sizeof(*m));
	if (m && !(m->f = open_memstream(&m->buf, &m->len))) {
		free(m);
		return NULL;
	}
	return m;
}

void sfs_metrics_family(struct sfs_metrics *m, const char *name,
			const char *type, const char *help)
{
	if (m)
		fprintf(m->f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name,
			type);
}

/* A label value, escaped as the format says. */
static void put_value(FILE *f, const char *v)
{
	for (; *v; v++) {
		if (*v == '\\' || *v == '"')
			fprintf(f, "\\%c", *v);
		else if (*v == '\n')
			fputs("\\n", f);
		else
			fputc(*v, f);
	}
}

/* {a="x",b="y"} from the pairs in @ap, with @extra ("le", value) last
 * when given; nothing without labels. */
static void put_labels(FILE *f, va_list ap, const char *extra_v)
{
	int n = 0;
	const char *k;
	while ((k = va_arg(ap, const char *))) {
		const char *v = va_arg(ap, const char *);
		fprintf(f, "%s%s=\"", n++ ? "," : "{", k);
		put_value(f, v ? v : "");
		fputc('"', f);
	}
	if (extra_v)
		fprintf(f, "%sle=\"%s\"", n++ ? "," : "{", extra_v);
	if (n)
		fputc('}', f);
}

/* @name, its labels from @ap, and @value already formatted. */
static void put_sample(struct sfs_metrics *m, const char *name,
		       const char *value, va_list ap)
{
	fputs(name, m->f);
	put_labels(m->f, ap, NULL);
	fprintf(m->f, " %s\n", value);
}

void sfs_metrics_u64(struct sfs_metrics *m, const char *name, uint64_t v, ...)
{
	char value[24];
	va_list ap;
	if (!m)
		return;
	snprintf(value, sizeof(value), "%" PRIu64, v);
	va_start(ap, v);
	put_sample(m, name, value, ap);
	va_end(ap);
}

void sfs_metrics_f64(struct sfs_metrics *m, const char *name, double v, ...)
{
	char value[40];
	va_list ap;
	if (!m)
		return;
	snprintf(value, sizeof(value), "%.17g", v);
	va_start(ap, v);
	put_sample(m, name, value, ap);
	va_end(ap);
}

void sfs_metrics_hist(struct sfs_metrics *m, const char *name,
		      const struct sfs_hist *h, ...)
{
	va_list ap;
	uint64_t cum = 0;
	char le[32];
	if (!m)
		return;
	for (size_t i = 0; i <= SFS_HIST_NB; i++) {
		cum += h->bucket[i];
		if (i < SFS_HIST_NB)
			snprintf(le, sizeof(le), "%g", sfs_hist_bounds[i]);
		else
			snprintf(le, sizeof(le), "+Inf");
		fprintf(m->f, "%s_bucket", name);
		va_start(ap, h);
		put_labels(m->f, ap, le);
		va_end(ap);
		fprintf(m->f, " %" PRIu64 "\n", cum);
	}
	fprintf(m->f, "%s_sum", name);
	va_start(ap, h);
	put_labels(m->f, ap, NULL);
	va_end(ap);
	fprintf(m->f, " %.6f\n", (double)h->sum_us / 1e6);
	fprintf(m->f, "%s_count", name);
	va_start(ap, h);
	put_labels(m->f, ap, NULL);
	va_end(ap);
	fprintf(m->f, " %" PRIu64 "\n", h->count);
}

int sfs_metrics_finish(struct sfs_metrics *m, char **text, size_t *len)
{
	if (!m)
		return -ENOMEM;
	int bad = ferror(m->f);
	if (fclose(m->f) || bad) {
		free(m->buf);
		free(m);
		return -ENOMEM;
	}
	*text = m->buf;
	*len = m->len;
	free(m);
	return 0;
}
