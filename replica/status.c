/* SPDX-License-Identifier: MIT */
/*
 * status.c - MOUNTPOINT/.seedfs/status: what this replica is doing, for
 * an SRE with cat and grep.  One "key: value" per line: the sources
 * (each seed block starts with "seed:"), the protocol, every model, the
 * cache, the errors by kind, the disk tier.
 */
#include "replica/replica_impl.h"

#include "cache/cache.h"
#include "cache/disk.h"
#include "common/util.h"
#include "control/control.h"
#include "control/sign.h"
#include "control/signstate.h"
#include "replica/reseed.h"
#include "replica/tree.h"

#include <errno.h>
#include <inttypes.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/*
 * One line of status: formatted, escaped whole (sfs_escape: names,
 * reasons and addresses come from the network or from disk, and a
 * newline or a control character in one must not print a line of its
 * own, which probes grep for), then its newline.
 */
static void put(FILE *f, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static void put(FILE *f, const char *fmt, ...)
{
	char line[2048], esc[4096];
	va_list ap;
	va_start(ap, fmt);
	int n = vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	if (n < 0)
		return;
	fputs(sfs_escape(line, SFS_MIN((size_t)n, sizeof(line) - 1), esc,
			 sizeof(esc)),
	      f);
	fputc('\n', f);
}

/* What is true now of source @s: its connection (up, reconnecting,
 * down, and since when), what it moves, whether its control port
 * answers, and what it serves of each model (or why not). */
static void render_source(FILE *f, struct sfs_replica *r, struct rsrc *s,
			  uint64_t queued)
{
	struct sfs_cache_peer_info pi;
	char b1[32];

	pthread_mutex_lock(&s->lock);
	if (s->self) {
		pthread_mutex_unlock(&s->lock);
		return; /* this replica, as a seed lists it */
	}
	if (s->dropped) {
		/* Why (rsrc_retire's words), else a --seed the registry
		 * dropped (never retired: it may come back). */
		char why[sizeof(s->retire_why)];
		snprintf(why, sizeof(why), "%s",
			 s->retire_why[0] ? s->retire_why
					  : "it is gone from the registry");
		pthread_mutex_unlock(&s->lock);
		put(f, "%s: %s (no longer a source: %s; not read from)",
		    s->reseeder ? "reseeder" : "seed", s->addr, why);
		return;
	}
	uint32_t cpeer = s->cpeer;
	int unreachable = s->unreachable;
	const char *kind = s->reseeder || s->holdings ? "reseeder" : "seed";
	uint64_t silent = s->silent_since ? sfs_now_ms() - s->silent_since : 0;
	char ctl_err[sizeof(s->ctl_err)];
	snprintf(ctl_err, sizeof(ctl_err), "%s", s->ctl_err);
	pthread_mutex_unlock(&s->lock);

	if (cpeer == SFS_CACHE_NONE || sfs_cache_peer(r->cache, cpeer, &pi)) {
		put(f, "%s: %s (%s)", kind, s->addr,
		    unreachable ? "unreachable" : "not connected");
	} else {
		if (unreachable)
			/* Its control port does not answer either: gone. */
			put(f, "%s: %s (unreachable for %.1f s: %s)", kind,
			    s->addr, (double)silent / 1e3, ctl_err);
		else if (pi.state == SFS_PEER_UP && pi.avoided_ms)
			put(f,
			    "%s: %s (reachable; stalled: for %.1f s only "
			    "what no other source holds)",
			    kind, s->addr, (double)pi.avoided_ms / 1e3);
		else if (pi.state == SFS_PEER_UP)
			put(f, "%s: %s (reachable)", kind, s->addr);
		else
			put(f, "%s: %s (%s for %.1f s: %s%s)", kind, s->addr,
			    pi.state == SFS_PEER_DOWN ? "unreachable"
						      : "reconnecting",
			    (double)pi.since_ms / 1e3, strerror(-pi.err),
			    pi.retry ? "; tried again at its next pull" : "");
		if (pi.any_ok)
			put(f, "seed_last_pull: %.1f s ago",
			    (double)pi.last_ok_ms / 1e3);
		else
			put(f, "seed_last_pull: none yet");
		put(f, "seed_rate: %.1f MB/s", pi.rate / 1e6);
		put(f,
		    "seed_pulls: %u in flight (at most %u), %" PRIu64 " queued",
		    pi.inflight, pi.window, queued);
		put(f, "seed_bytes: %" PRIu64 " (%s) in %" PRIu64 " pulls",
		    pi.bytes, sfs_fmt_bytes(pi.bytes, b1, sizeof(b1)),
		    pi.pulls);
		put(f,
		    "seed_errors: transport %" PRIu64 " checksum %" PRIu64
		    " stalls %" PRIu64 "",
		    pi.errors, pi.checksum_errors, pi.stalls);
		if (pi.trusted)
			put(f, "seed_checked: XXH3-64 (a seed)");
		else if (pi.proven)
			put(f, "seed_checked: SHA-256 (served since its last "
			       "failure)");
		else if (pi.probe_ms)
			put(f,
			    "seed_checked: SHA-256 (failed: tried again in "
			    "%.1f s, keeps no seed off a chunk)",
			    (double)pi.probe_ms / 1e3);
		else
			put(f, "seed_checked: SHA-256 (not served yet: keeps "
			       "no seed off a chunk)");
	}
	if (unreachable)
		put(f, "seed_control: no answer for %.1f s (%s)",
		    (double)silent / 1e3, ctl_err);
	else
		put(f, "seed_control: answers");
	pthread_mutex_lock(&r->lock);
	size_t brought = s->nmodels;
	uint64_t refused = s->models_refused;
	pthread_mutex_unlock(&r->lock);
	if (brought || refused)
		put(f,
		    "seed_models: %zu brought in, %" PRIu64
		    " refused at the caps",
		    brought, refused);
	pthread_mutex_lock(&s->lock);
	for (size_t k = 0; k < s->nknown; k++) {
		const struct rsrc_known *kn = &s->known[k];
		if (!kn->listed)
			continue;
		if (kn->used)
			put(f,
			    "seed_model: %s generation %" PRIu64
			    " (content %016" PRIx64 ")",
			    kn->name, kn->generation, kn->content);
		else
			put(f,
			    "seed_model: %s generation %" PRIu64 " refused: %s",
			    kn->name, kn->generation,
			    *kn->why ? kn->why : "not looked at yet");
		if (s->reseeder && kn->used)
			put(f,
			    "seed_holdings: %s %" PRIu64
			    " answers, version %" PRIu64 "%s%s",
			    kn->name, kn->hold_answers, kn->hold_version,
			    *kn->hold_why ? "; last refused: " : "",
			    kn->hold_why);
	}
	pthread_mutex_unlock(&s->lock);
}

/* One model: its current generation and identity, hidden or not, and
 * how many older generations open files still read (*older), and how
 * many views it holds in memory, expired ones too (*views). */
/* @ns since the epoch as "2026-12-05T01:00:00Z" ("-": 0). */
static const char *utc(int64_t ns, char *buf, size_t len)
{
	time_t t = (time_t)(ns / 1000000000);
	struct tm tm;
	if (!ns || !gmtime_r(&t, &tm) ||
	    !strftime(buf, len, "%Y-%m-%dT%H:%M:%SZ", &tm))
		snprintf(buf, len, "-");
	return buf;
}

static void render_model(FILE *f, struct sfs_replica *r, struct sfs_model *mo,
			 size_t *older, size_t *views)
{
	pthread_mutex_lock(&mo->lock);
	for (const struct sfs_view *o = mo->views; o; o = o->next)
		(*views)++;
	const struct sfs_view *v = mo->current;
	if (!v) {
		char why[sizeof(mo->why)];
		snprintf(why, sizeof(why), "%s", mo->why);
		pthread_mutex_unlock(&mo->lock);
		put(f, "model: %s (%s)", mo->name,
		    *why ? why : "no generation yet");
		return;
	}
	const struct sfs_manifest *m = v->m;
	const struct sfs_identity *id = &m->id;
	uint64_t bytes = 0;
	size_t holders = 0;
	for (size_t i = 0; i < m->nfiles; i++)
		bytes += m->files[i].size;
	for (const struct sfs_vholder *h = v->holders; h; h = h->next)
		holders++;
	for (const struct sfs_view *o = mo->views; o; o = o->next)
		*older += o != v && !o->expired;
	put(f,
	    "model: %s generation %" PRIu64 " files %zu bytes %" PRIu64
	    " tensors %zu sources %zu identity %s%s",
	    m->model, v->generation, m->nfiles, bytes, m->ntensors, holders,
	    m->id_short, mo->hidden ? " (hidden)" : "");
	put(f,
	    "identity: model=%s revision=%s dtype=%s quant=%s layout=%s "
	    "layout_version=%" PRIu64 " tp=%" PRIu64 "/%" PRIu64 " pp=%" PRIu64
	    "/%" PRIu64 " ep=%" PRIu64 "/%" PRIu64 " framework=%s",
	    id->model, id->revision[0] ? id->revision : "-",
	    id->dtype[0] ? id->dtype : "-", id->quant, id->layout,
	    id->layout_version, id->tp_rank, id->tp_size, id->pp_rank,
	    id->pp_size, id->ep_rank, id->ep_size, id->framework);
	if (m->has_sig) {
		char at[32], until[32];
		put(f,
		    "signature: key %s signer %s run %016" PRIx64
		    " signed %s valid_until %s",
		    m->sig_key, m->signer[0] ? m->signer : "-", m->signer_run,
		    utc(m->signed_at, at, sizeof(at)),
		    utc(m->valid_until, until, sizeof(until)));
	}
	if (mo->hidden)
		put(f, "hidden: %s: %s", mo->name, mo->why);
	pthread_mutex_unlock(&mo->lock);
}

int sfs_replica_status(void *arg, char **text, size_t *len)
{
	struct sfs_replica *r = arg;
	struct sfs_cache_stats st;
	char when[32], b1[32], b2[32];
	FILE *f;

	sfs_cache_stats(r->cache, &st);
	uint64_t now = sfs_now_ns();
	double up = (double)(now - r->mounted_ns) / 1e9;
	/* The current rate: over the time since the last look, if that
	 * is long enough to mean something, else the last value. */
	pthread_mutex_lock(&r->lock);
	if (now - r->last_ns >= 200000000u) {
		r->rate_now = (double)(st.bytes_pulled - r->last_bytes) /
			      ((double)(now - r->last_ns) / 1e9);
		r->last_ns = now;
		r->last_bytes = st.bytes_pulled;
	}
	double rate_now = r->rate_now;
	uint64_t ready = r->ready_ms, xport = r->transport_ms;
	uint64_t refused = r->models_refused;
	pthread_mutex_unlock(&r->lock);
	struct sfs_model **all;
	size_t nmodels = model_all(r, &all);

	if (!(f = open_memstream(text, len))) {
		model_put_all(all, nmodels);
		return -ENOMEM;
	}
	strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", gmtime(&r->mounted));
	uint64_t lookups = st.hits + st.misses;
	put(f, "seedfs: %s", SEEDFS_VERSION);
	/* A mount, or what else runs the core (the engine API). */
	put(f, "%s: %s (%.0f s ago)",
	    strcmp(r->cfg.who, "seedfs mount") ? "started" : "mounted", when,
	    up);
	if (ready)
		put(f,
		    "startup: ready in %.2f s (transport start-up %.2f "
		    "s)",
		    (double)ready / 1e3, (double)xport / 1e3);
	struct rsrc **srcs;
	size_t nsrcs = rsrc_all(r, &srcs);
	for (size_t i = 0; i < nsrcs; i++)
		render_source(f, r, srcs[i], st.queued);
	rsrc_put_all(srcs, nsrcs);
	char caps[400];
	rsrc_cap_status(r, caps, sizeof(caps));
	fputs(caps, f);
	if (r->fleet) {
		char reg[1200];
		fleet_status(r, reg, sizeof(reg));
		fputs(reg, f);
	}
	put(f, "protocol: %s (%s)", r->proto, r->provider);
	char sec[600];
	sfs_control_cred_describe(r->cfg.cred, sec, sizeof(sec));
	put(f, "control_security: %s", sec);
	const struct sfs_trust *trust = sfs_control_cred_trust(r->cfg.cred);
	if (trust)
		put(f,
		    "manifest_trust: signed by a key in %s, every chunk "
		    "checked with its SHA-256",
		    sfs_trust_path(trust));
	else
		put(f, "manifest_trust: none (unsigned manifests taken; "
		       "--trust-key)");
	if (r->signstate)
		put(f, "signed_generations: %zu remembered in %s",
		    sfs_signstate_count(r->signstate),
		    sfs_signstate_path(r->signstate));
	if (r->reseed)
		put(f, "reseed: %s (serving what this mount holds)",
		    sfs_reseed_address(r->reseed));
	if (r->control)
		put(f, "control: %s", r->control);
	if (r->metrics_srv)
		put(f, "metrics: %s://%s/metrics",
		    r->cfg.metrics_tls ? "https" : "http", r->metrics_addr);
	size_t older = 0, views = 0;
	fprintf(f,
		"models: %zu (at most %zu, %zu from one source; %" PRIu64
		" refused at those caps)\n",
		nmodels, r->max_models, model_share(r), refused);
	for (size_t i = 0; i < nmodels; i++)
		render_model(f, r, all[i], &older, &views);
	model_put_all(all, nmodels);
	if (r->cfg.require_text)
		put(f, "require: %s", r->cfg.require_text);
	put(f, "older_generations_served: %zu", older);
	/* What the mount holds per generation and per holder: bounded by
	 * what is live (a long-lived mount under churn must not grow). */
	pthread_rwlock_rdlock(&r->tree_lock);
	size_t nodes = r->tree->n;
	pthread_rwlock_unlock(&r->tree_lock);
	put(f, "views_held: %zu", views);
	put(f, "tree_nodes: %zu", nodes);
	put(f, "cache_sets: %" PRIu64 "", st.live_sets);
	put(f, "cache_holders: %" PRIu64 "", st.live_holders);
	put(f, "cache_peers: %" PRIu64 " (%" PRIu64 " slots)", st.live_peers,
	    st.peer_slots);
#ifdef __GLIBC__
	/* What the heap holds in use, beside the RSS: a mount that grows
	 * while this stays flat keeps freed memory, not a leak. */
	struct mallinfo2 mi = mallinfo2();
	put(f, "heap_in_use: %zu (%s)", mi.uordblks,
	    sfs_fmt_bytes(mi.uordblks, b1, sizeof(b1)));
#endif
	put(f, "cache_size: %" PRIu64 " (%s)", st.size,
	    sfs_fmt_bytes(st.size, b1, sizeof(b1)));
	if (st.ready < st.size)
		put(f, "cache_ready: %" PRIu64 " (%s; it grows as it needs)",
		    st.ready, sfs_fmt_bytes(st.ready, b2, sizeof(b2)));
	put(f, "cache_used: %" PRIu64 " (%s)", st.used,
	    sfs_fmt_bytes(st.used, b2, sizeof(b2)));
	put(f, "chunk_size: %" PRIu64 "", st.chunk_size);
	put(f, "read_ahead_max: %" PRIu64 " (%s; %s)", r->ra_max,
	    sfs_fmt_bytes(r->ra_max, b2, sizeof(b2)),
	    r->ra_tensors ? "sequential readers, and to a tensor's end"
			  : "sequential readers only");
	put(f, "cache_hits: %" PRIu64 "", st.hits);
	put(f, "cache_misses: %" PRIu64 "", st.misses);
	put(f, "cache_hit_rate: %.3f",
	    lookups ? (double)st.hits / (double)lookups : 0.0);
	put(f, "pulls: %" PRIu64 "", st.pulls);
	put(f, "bytes_pulled: %" PRIu64 " (%s)", st.bytes_pulled,
	    sfs_fmt_bytes(st.bytes_pulled, b1, sizeof(b1)));
	put(f, "inherited_chunks: %" PRIu64 "", st.inherited);
	put(f, "inherited_bytes: %" PRIu64 " (%s)", st.inherited_bytes,
	    sfs_fmt_bytes(st.inherited_bytes, b1, sizeof(b1)));
	put(f, "pull_rate_now: %.1f MB/s", rate_now / 1e6);
	put(f, "pull_rate_avg: %.1f MB/s",
	    up > 0 ? (double)st.bytes_pulled / up / 1e6 : 0.0);
	/* One reading of the routes: the total is their sum. */
	uint64_t rrx[SFS_CTL_ROUTES], rtx, crx = 0, ctx = 0;
	for (int i = 0; i < SFS_CTL_ROUTES; i++) {
		sfs_control_traffic_route(i, &rrx[i], &rtx);
		crx += rrx[i];
		ctx += rtx;
	}
	put(f,
	    "control_bytes: %" PRIu64 " received, %" PRIu64
	    " sent (%.3f %% of bytes_pulled)",
	    crx, ctx,
	    st.bytes_pulled
		    ? 100.0 * (double)(crx + ctx) / (double)st.bytes_pulled
		    : 0.0);
	char by[256];
	size_t at = 0;
	for (int i = 0; i < SFS_CTL_ROUTES && at < sizeof(by); i++) {
		int w = snprintf(by + at, sizeof(by) - at, "%s%s %" PRIu64,
				 i ? ", " : "", sfs_control_route_name(i),
				 rrx[i]);
		at += w > 0 ? (size_t)w : 0;
	}
	put(f, "control_received_by_route: %s", by);
	put(f, "failovers: %" PRIu64 "", st.failovers);
	put(f, "checked_sha256: %" PRIu64 " chunks", st.strong_checks);
	put(f, "hedges: %" PRIu64 "", st.hedges);
	put(f, "reseeder_failures: %" PRIu64 "", st.member_failures);
	if (st.lane_own || st.lane_others)
		put(f,
		    "seed_pulls_shared: %" PRIu64
		    " of this replica's lane, %" PRIu64
		    " of others' (not waited for)",
		    st.lane_own, st.lane_others);
	if (r->reseed)
		put(f, "export_evictions: %" PRIu64 "", st.export_evictions);
	put(f, "errors_transport: %" PRIu64 "", st.errors_transport);
	put(f, "pulls_retried_alone: %" PRIu64 "", st.solo_retries);
	put(f, "errors_timeout: %" PRIu64 "", st.timeouts);
	put(f, "errors_checksum: %" PRIu64 "", st.checksum_errors);
	put(f, "errors_unavailable: %" PRIu64 "", st.unavailable);
	put(f, "errors_no_chunk: %" PRIu64 "", st.no_slot);
	put(f, "reconnects: %" PRIu64 "", st.reconnects);
	put(f, "reconnect_failures: %" PRIu64 "", st.reconnect_failures);
	if (r->disk) {
		uint64_t used, max;
		sfs_disk_usage(r->disk, &used, &max);
		put(f, "disk_dir: %s", sfs_disk_path(r->disk));
		put(f, "disk_used: %" PRIu64 " (%s)", used,
		    sfs_fmt_bytes(used, b1, sizeof(b1)));
		put(f, "disk_size: %" PRIu64 "%s", max,
		    max ? "" : " (no bound)");
		put(f, "disk_sources: %zu", sfs_disk_sources(r->disk));
		put(f, "disk_hits: %" PRIu64 "", st.disk_hits);
		put(f, "disk_bytes_read: %" PRIu64 " (%s)", st.disk_bytes_read,
		    sfs_fmt_bytes(st.disk_bytes_read, b1, sizeof(b1)));
		put(f, "disk_stores: %" PRIu64 "", st.disk_stores);
		put(f, "disk_bytes_written: %" PRIu64 " (%s)",
		    st.disk_bytes_written,
		    sfs_fmt_bytes(st.disk_bytes_written, b1, sizeof(b1)));
		put(f, "disk_not_stored: %" PRIu64 "", st.disk_skipped);
		put(f, "disk_queue: %" PRIu64 "", st.disk_queue);
		put(f, "errors_disk: %" PRIu64 "", st.disk_errors);
		put(f, "errors_disk_timeout: %" PRIu64 "", st.disk_timeouts);
	}
	if (fclose(f))
		return -ENOMEM;
	return 0;
}
