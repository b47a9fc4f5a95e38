/* SPDX-License-Identifier: MIT */
/*
 * metrics.c - MOUNTPOINT/.seedfs/metrics and --metrics-listen: what
 * .seedfs/status says, as Prometheus text (docs/metrics.md).  The
 * cache's counters, each source's pulls, bytes, rate and errors, a pull
 * latency histogram, errors by kind, failovers, the disk tier.
 */
#include "replica/replica_impl.h"

#include "cache/cache.h"
#include "cache/disk.h"
#include "common/metrics.h"
#include "common/log.h"
#include "common/util.h"
#include "control/control.h"
#include "control/ctlsrv.h"
#include "replica/reseed.h"
#include "transports/transport.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One source, as the cache knows it now. */
struct src_nums {
	const char *addr, *kind;
	int known; /* it has a cache peer */
	int up;
	struct sfs_cache_peer_info pi;
};

/* Each source's numbers into @n; @all: the sources, referenced while
 * @n's addresses are used. */
static void sources(struct sfs_replica *r, struct rsrc **all, size_t ns,
		    struct src_nums *n, size_t *nn)
{
	*nn = 0;
	for (size_t i = 0; i < ns; i++) {
		struct rsrc *s = all[i];
		pthread_mutex_lock(&s->lock);
		int skip = s->self || s->dropped;
		uint32_t cpeer = s->cpeer;
		int unreachable = s->unreachable;
		pthread_mutex_unlock(&s->lock);
		if (skip)
			continue;
		struct src_nums *e = &n[(*nn)++];
		memset(e, 0, sizeof(*e));
		e->addr = s->addr;
		e->kind = s->reseeder ? "reseeder" : "seed";
		e->known = cpeer != SFS_CACHE_NONE &&
			   !sfs_cache_peer(r->cache, cpeer, &e->pi);
		e->up = e->known && !unreachable && e->pi.state == SFS_PEER_UP;
	}
}

/* A counter or gauge with one sample per source. */
static void per_source(struct sfs_metrics *m, const struct src_nums *n,
		       size_t nn, const char *name, const char *type,
		       const char *help, size_t field)
{
	sfs_metrics_family(m, name, type, help);
	for (size_t i = 0; i < nn; i++) {
		const struct sfs_cache_peer_info *pi = &n[i].pi;
		uint64_t v[] = {(uint64_t)n[i].up, pi->pulls, pi->bytes,
				pi->inflight, pi->stalls};
		sfs_metrics_u64(m, name, v[field], "source", n[i].addr, "kind",
				n[i].kind, NULL);
	}
}

/* A metric of one unlabelled sample. */
struct one {
	const char *name, *type, *help;
	uint64_t v;
};

static void ones(struct sfs_metrics *m, const struct one *o, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		sfs_metrics_family(m, o[i].name, o[i].type, o[i].help);
		sfs_metrics_u64(m, o[i].name, o[i].v, NULL);
	}
}

int sfs_replica_metrics(void *arg, char **text, size_t *len)
{
	struct sfs_replica *r = arg;
	struct sfs_cache_stats st;
	struct src_nums *n = calloc(RSRC_MAX, sizeof(*n));
	struct sfs_metrics *m = sfs_metrics_new();
	size_t nn = 0;

	if (!n || !m) {
		free(n);
		if (!sfs_metrics_finish(m, text, len))
			free(*text);
		return -ENOMEM;
	}
	sfs_cache_stats(r->cache, &st);
	struct rsrc **srcs;
	size_t ns = rsrc_all(r, &srcs);
	sources(r, srcs, ns, n, &nn);
	double up = (double)(sfs_now_ns() - r->mounted_ns) / 1e9;

	sfs_metrics_family(m, "seedfs_info", "gauge",
			   "This replica: version, protocol read through.");
	sfs_metrics_u64(m, "seedfs_info", 1, "version", SEEDFS_VERSION,
			"protocol", r->proto, "provider", r->provider, NULL);
	sfs_metrics_family(m, "seedfs_uptime_seconds", "gauge",
			   "Seconds since the mount (or the engine API) "
			   "started.");
	sfs_metrics_f64(m, "seedfs_uptime_seconds", up, NULL);

	const struct one cache[] = {
		{"seedfs_cache_size_bytes", "gauge", "The memory cache's size.",
		 st.size},
		{"seedfs_cache_used_bytes", "gauge",
		 "Bytes of the memory cache holding chunks.", st.used},
		{"seedfs_cache_hits_total", "counter",
		 "Chunk lookups the memory cache answered.", st.hits},
		{"seedfs_cache_misses_total", "counter",
		 "Chunk lookups that needed a pull (or the disk tier).",
		 st.misses},
		{"seedfs_pulls_total", "counter",
		 "Chunks pulled from sources and verified.", st.pulls},
		{"seedfs_pulled_bytes_total", "counter",
		 "Bytes pulled from sources and verified.", st.bytes_pulled},
		{"seedfs_inherited_chunks_total", "counter",
		 "Chunks a new generation took from the one before: the "
		 "same bytes, not pulled again.",
		 st.inherited},
		{"seedfs_inherited_bytes_total", "counter",
		 "Bytes of those chunks.", st.inherited_bytes},
	};
	ones(m, cache, SFS_ARRAY_SIZE(cache));
	sfs_metrics_family(m, "seedfs_pull_duration_seconds", "histogram",
			   "Pulls from post to verified bytes.");
	sfs_metrics_hist(m, "seedfs_pull_duration_seconds", &st.pull_latency,
			 NULL);
	sfs_metrics_family(m, "seedfs_pulls_queued", "gauge",
			   "Chunks waiting for a source, now.");
	sfs_metrics_u64(m, "seedfs_pulls_queued", st.queued, NULL);

	per_source(m, n, nn, "seedfs_source_up", "gauge",
		   "1 when the source is reachable and read from.", 0);
	per_source(m, n, nn, "seedfs_source_pulls_total", "counter",
		   "Chunks pulled from the source and verified.", 1);
	per_source(m, n, nn, "seedfs_source_read_bytes_total", "counter",
		   "Bytes pulled from the source and verified.", 2);
	per_source(m, n, nn, "seedfs_source_pulls_in_flight", "gauge",
		   "Pulls posted to the source, now.", 3);
	per_source(m, n, nn, "seedfs_source_stalls_total", "counter",
		   "Times the source was taken out for making no "
		   "progress.",
		   4);
	sfs_metrics_family(m, "seedfs_source_rate_bytes_per_second", "gauge",
			   "The source's measured throughput while busy.");
	for (size_t i = 0; i < nn; i++)
		sfs_metrics_f64(m, "seedfs_source_rate_bytes_per_second",
				n[i].pi.rate, "source", n[i].addr, "kind",
				n[i].kind, NULL);
	sfs_metrics_family(m, "seedfs_source_errors_total", "counter",
			   "The source's pulls that failed, by kind.");
	for (size_t i = 0; i < nn; i++) {
		sfs_metrics_u64(m, "seedfs_source_errors_total", n[i].pi.errors,
				"source", n[i].addr, "kind", n[i].kind, "error",
				"transport", NULL);
		sfs_metrics_u64(m, "seedfs_source_errors_total",
				n[i].pi.checksum_errors, "source", n[i].addr,
				"kind", n[i].kind, "error", "checksum", NULL);
	}

	/* One reading of the routes: the total is their sum. */
	uint64_t rrx[SFS_CTL_ROUTES], rtx[SFS_CTL_ROUTES], crx = 0, ctx = 0;
	for (int i = 0; i < SFS_CTL_ROUTES; i++) {
		sfs_control_traffic_route(i, &rrx[i], &rtx[i]);
		crx += rrx[i];
		ctx += rtx[i];
	}
	sfs_metrics_family(m, "seedfs_control_bytes_total", "counter",
			   "HTTP bytes this replica's control-port client "
			   "received and sent (headers and bodies).");
	sfs_metrics_u64(m, "seedfs_control_bytes_total", crx, "direction",
			"received", NULL);
	sfs_metrics_u64(m, "seedfs_control_bytes_total", ctx, "direction",
			"sent", NULL);
	sfs_metrics_family(m, "seedfs_control_route_bytes_total", "counter",
			   "seedfs_control_bytes_total by the route asked "
			   "(holdings, manifest, models, sources, other).");
	for (int i = 0; i < SFS_CTL_ROUTES; i++) {
		const char *rn = sfs_control_route_name(i);
		sfs_metrics_u64(m, "seedfs_control_route_bytes_total", rrx[i],
				"route", rn, "direction", "received", NULL);
		sfs_metrics_u64(m, "seedfs_control_route_bytes_total", rtx[i],
				"route", rn, "direction", "sent", NULL);
	}
	struct rsrc_caps caps;
	rsrc_caps(r, &caps);
	const struct one tab[] = {
		{"seedfs_sources_live", "gauge",
		 "Sources in the table, now (cap 64).", caps.live},
		{"seedfs_peers_live", "gauge",
		 "Re-seeders among them, now (cap 8).", caps.peers},
		{"seedfs_sources_freed_total", "counter",
		 "Sources freed because they were gone.", caps.freed},
	};
	ones(m, tab, SFS_ARRAY_SIZE(tab));
	sfs_metrics_family(m, "seedfs_sources_refused_total", "counter",
			   "Sources not taken, by the cap that refused them.");
	sfs_metrics_u64(m, "seedfs_sources_refused_total", caps.refused, "cap",
			"sources", NULL);
	sfs_metrics_u64(m, "seedfs_sources_refused_total", caps.peers_refused,
			"cap", "peers", NULL);

	sfs_metrics_family(m, "seedfs_failovers_total", "counter",
			   "Pulls moved to another source.");
	sfs_metrics_u64(m, "seedfs_failovers_total", st.failovers, NULL);
	sfs_metrics_family(m, "seedfs_hedges_total", "counter",
			   "Pulls from re-seeders moved to a seed: they took "
			   "much longer than a seed's.");
	sfs_metrics_u64(m, "seedfs_hedges_total", st.hedges, NULL);
	sfs_metrics_family(m, "seedfs_reseeder_failures_total", "counter",
			   "Pulls from re-seeders that failed, stalled, did "
			   "not match or were hedged.");
	sfs_metrics_u64(m, "seedfs_reseeder_failures_total", st.member_failures,
			NULL);
	sfs_metrics_family(m, "seedfs_checked_sha256_total", "counter",
			   "Chunks from re-seeders checked against SHA-256.");
	sfs_metrics_u64(m, "seedfs_checked_sha256_total", st.strong_checks,
			NULL);
	sfs_metrics_family(m, "seedfs_reconnects_total", "counter",
			   "New connections made to sources.");
	sfs_metrics_u64(m, "seedfs_reconnects_total", st.reconnects, NULL);
	const struct {
		const char *kind;
		uint64_t v;
	} errs[] = {
		{"transport", st.errors_transport},
		{"timeout", st.timeouts},
		{"checksum", st.checksum_errors},
		{"unavailable", st.unavailable},
		{"no_chunk", st.no_slot},
		{"reconnect", st.reconnect_failures},
		{"disk", st.disk_errors},
		{"disk_timeout", st.disk_timeouts},
	};
	sfs_metrics_family(m, "seedfs_errors_total", "counter",
			   "Errors by kind (docs/metrics.md).");
	for (size_t i = 0; i < SFS_ARRAY_SIZE(errs); i++)
		sfs_metrics_u64(m, "seedfs_errors_total", errs[i].v, "kind",
				errs[i].kind, NULL);

	struct sfs_model **all;
	size_t nmodels = model_all(r, &all);
	sfs_metrics_family(m, "seedfs_model_generation", "gauge",
			   "The generation each model is read at (0: none "
			   "yet).");
	for (size_t i = 0; i < nmodels; i++) {
		struct sfs_model *mo = all[i];
		pthread_mutex_lock(&mo->lock);
		uint64_t g = mo->current ? mo->current->generation : 0;
		pthread_mutex_unlock(&mo->lock);
		sfs_metrics_u64(m, "seedfs_model_generation", g, "model",
				mo->name, NULL);
	}
	model_put_all(all, nmodels);

	if (r->disk) {
		uint64_t used, max;
		sfs_disk_usage(r->disk, &used, &max);
		const struct one d[] = {
			{"seedfs_disk_used_bytes", "gauge",
			 "Bytes the disk tier holds.", used},
			{"seedfs_disk_size_bytes", "gauge",
			 "The disk tier's bound (0: none).", max},
			{"seedfs_disk_hits_total", "counter",
			 "Chunks loaded from the disk tier, verified.",
			 st.disk_hits},
			{"seedfs_disk_read_bytes_total", "counter",
			 "Bytes loaded from the disk tier.",
			 st.disk_bytes_read},
			{"seedfs_disk_stores_total", "counter",
			 "Chunks written to the disk tier.", st.disk_stores},
			{"seedfs_disk_written_bytes_total", "counter",
			 "Bytes written to the disk tier.",
			 st.disk_bytes_written},
			{"seedfs_disk_not_stored_total", "counter",
			 "Chunks not written (full, or writes behind).",
			 st.disk_skipped},
			{"seedfs_disk_queue_chunks", "gauge",
			 "Chunks waiting to be written.", st.disk_queue},
		};
		ones(m, d, SFS_ARRAY_SIZE(d));
	}
	if (r->reseed) {
		sfs_metrics_family(m, "seedfs_export_evictions_total",
				   "counter",
				   "Chunks served to other replicas that were "
				   "evicted early.");
		sfs_metrics_u64(m, "seedfs_export_evictions_total",
				st.export_evictions, NULL);
		sfs_reseed_metrics(r->reseed, m);
	}
	sfs_xport_listen_metrics(m);
	free(n);
	rsrc_put_all(srcs, ns);
	return sfs_metrics_finish(m, text, len);
}

/* --metrics-listen: GET /metrics, /v1/health. */
static int metrics_handle(void *arg, const struct sfs_ctl_req *req,
			  struct sfs_ctl_resp *resp)
{
	if (strcmp(req->method, "GET") && strcmp(req->method, "HEAD"))
		return sfs_ctl_text(resp, 405, "GET /metrics\n");
	if (!strcmp(req->url, "/v1/health"))
		return sfs_ctl_text(resp, 200, "ok\n");
	if (strcmp(req->url, "/metrics"))
		return sfs_ctl_text(resp, 404, "not found; try /metrics\n");
	int rc = sfs_replica_metrics(arg, &resp->body, &resp->body_len);
	if (rc)
		return rc;
	resp->status = 200;
	resp->type = SFS_METRICS_TYPE;
	return 0;
}

int metrics_serve(struct sfs_replica *r, const char *listen, char *err,
		  size_t errlen)
{
	static const char *const routes[] = {"/metrics", "/v1/health", NULL};
	char host[256], port[16];
	unsigned int bound;
	if (sfs_parse_hostport(listen, host, sizeof(host), port,
			       sizeof(port)) ||
	    !*port) {
		snprintf(err, errlen, "--metrics-listen '%s' is not HOST:PORT",
			 listen);
		return -EINVAL;
	}
	struct sfs_ctlsrv_cfg sc = {.host = host,
				    .port = port,
				    .body_max = 0,
				    .auth = sfs_control_cred_auth(r->cfg.cred),
				    .scrape = r->cfg.metrics_auth,
				    .tls = r->cfg.metrics_tls,
				    .routes = routes};
	char e[300];
	int rc = sfs_ctlsrv_start(&sc, metrics_handle, r, &r->metrics_srv,
				  &bound, e, sizeof(e));
	if (rc) {
		snprintf(err, errlen, "--metrics-listen %s: %s", listen, e);
		return rc;
	}
	int v6 = strchr(host, ':') != NULL;
	snprintf(r->metrics_addr, sizeof(r->metrics_addr), "%s%s%s:%u",
		 v6 ? "[" : "", *host ? host : "0.0.0.0", v6 ? "]" : "", bound);
	if (!sc.auth && !sc.scrape && !sfs_ctlsrv_loopback(host))
		SFS_LOG(SFS_WARN, "metrics",
			"--metrics-listen %s answers anyone who can reach it "
			"(no --token-file or --metrics-token-file)",
			r->metrics_addr);
	return 0;
}

void metrics_stop(struct sfs_replica *r)
{
	sfs_ctlsrv_stop(r->metrics_srv);
	r->metrics_srv = NULL;
}

const char *sfs_replica_metrics_address(const struct sfs_replica *r)
{
	return r->metrics_srv ? r->metrics_addr : NULL;
}
