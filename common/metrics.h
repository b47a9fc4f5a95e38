/* SPDX-License-Identifier: MIT */
/*
 * metrics.h - Prometheus text exposition (format 0.0.4) and a latency
 * histogram, for the seed's GET /metrics and a mount's .seedfs/metrics.
 *
 *   struct sfs_metrics *m = sfs_metrics_new();
 *   sfs_metrics_family(m, "seedfs_pulls_total", "counter", "Chunks pulled.");
 *   sfs_metrics_u64(m, "seedfs_pulls_total", n, NULL);
 *   sfs_metrics_u64(m, "seedfs_source_pulls_total", k, "source", addr, NULL);
 *   rc = sfs_metrics_finish(m, &text, &len);
 *
 * Label values are escaped (backslash, quote, newline); names are the
 * caller's constants.  A failed allocation is remembered and reported
 * once by sfs_metrics_finish.  A struct sfs_metrics belongs to one
 * thread; struct sfs_hist is protected by whatever lock its owner names.
 */
#ifndef SFS_METRICS_H
#define SFS_METRICS_H

#include <stddef.h>
#include <stdint.h>

/* The Content-Type of the text this module writes. */
#define SFS_METRICS_TYPE "text/plain; version=0.0.4; charset=utf-8"

/* Upper bounds of the latency buckets, in seconds (+Inf is implied). */
#define SFS_HIST_NB 16
extern const double sfs_hist_bounds[SFS_HIST_NB];

/* Observations in buckets (not cumulative here; written cumulative). */
struct sfs_hist {
	uint64_t bucket[SFS_HIST_NB + 1]; /* the last one: over every bound */
	uint64_t count;
	uint64_t sum_us;
};

/* sfs_hist_observe - count one observation of @us microseconds.  Not
 * thread safe: under the owner's lock. */
void sfs_hist_observe(struct sfs_hist *h, uint64_t us);

struct sfs_metrics;

/* sfs_metrics_new - an empty text [new], or NULL (out of memory). */
struct sfs_metrics *sfs_metrics_new(void);

/* sfs_metrics_family - the # HELP and # TYPE lines of metric @name;
 * @type is "counter", "gauge" or "histogram".  Once per name, before
 * its samples. */
void sfs_metrics_family(struct sfs_metrics *m, const char *name,
			const char *type, const char *help);

/*
 * sfs_metrics_u64, sfs_metrics_f64 - one sample of @name, with labels
 * given as name, value pairs [borrowed] ended by NULL.
 */
void sfs_metrics_u64(struct sfs_metrics *m, const char *name, uint64_t v, ...)
	__attribute__((sentinel));
void sfs_metrics_f64(struct sfs_metrics *m, const char *name, double v, ...)
	__attribute__((sentinel));

/* sfs_metrics_hist - @name's _bucket, _sum (seconds) and _count samples
 * of @h, with labels as above.  Its family line is the caller's
 * (type "histogram"). */
void sfs_metrics_hist(struct sfs_metrics *m, const char *name,
		      const struct sfs_hist *h, ...) __attribute__((sentinel));

/*
 * sfs_metrics_finish - the text into *text [new, free()] and its length;
 * frees @m (NULL is fine: -ENOMEM).  Returns 0 or -ENOMEM.
 */
int sfs_metrics_finish(struct sfs_metrics *m, char **text, size_t *len);

#endif /* SFS_METRICS_H */
