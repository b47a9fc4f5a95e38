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
#include "metadata/control.h"
#include "replica/reseed.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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
		pthread_mutex_unlock(&s->lock);
		fprintf(f, "%s: %s (gone from the registry: not read from)\n",
			s->reseeder ? "reseeder" : "seed", s->addr);
		return;
	}
	uint32_t cpeer = s->cpeer;
	int unreachable = s->unreachable;
	uint64_t silent = s->silent_since ? sfs_now_ms() - s->silent_since : 0;
	char ctl_err[sizeof(s->ctl_err)];
	snprintf(ctl_err, sizeof(ctl_err), "%s", s->ctl_err);
	pthread_mutex_unlock(&s->lock);

	const char *kind = s->reseeder ? "reseeder" : "seed";
	if (cpeer == SFS_CACHE_NONE || sfs_cache_peer(r->cache, cpeer, &pi)) {
		fprintf(f, "%s: %s (%s)\n", kind, s->addr,
			unreachable ? "unreachable" : "not connected");
	} else {
		if (unreachable)
			/* Its control port does not answer either: gone. */
			fprintf(f, "%s: %s (unreachable for %.1f s: %s)\n",
				kind, s->addr, (double)silent / 1e3, ctl_err);
		else if (pi.state == SFS_PEER_UP && pi.avoided_ms)
			fprintf(f,
				"%s: %s (reachable; stalled: for %.1f s only "
				"what no other source holds)\n",
				kind, s->addr, (double)pi.avoided_ms / 1e3);
		else if (pi.state == SFS_PEER_UP)
			fprintf(f, "%s: %s (reachable)\n", kind, s->addr);
		else
			fprintf(f, "%s: %s (%s for %.1f s: %s)\n", kind,
				s->addr,
				pi.state == SFS_PEER_DOWN ? "unreachable"
							  : "reconnecting",
				(double)pi.since_ms / 1e3, strerror(-pi.err));
		if (pi.any_ok)
			fprintf(f, "seed_last_pull: %.1f s ago\n",
				(double)pi.last_ok_ms / 1e3);
		else
			fprintf(f, "seed_last_pull: none yet\n");
		fprintf(f, "seed_rate: %.1f MB/s\n", pi.rate / 1e6);
		fprintf(f,
			"seed_pulls: %u in flight (at most %u), %" PRIu64
			" queued\n",
			pi.inflight, pi.window, queued);
		fprintf(f,
			"seed_bytes: %" PRIu64 " (%s) in %" PRIu64 " pulls\n",
			pi.bytes, sfs_fmt_bytes(pi.bytes, b1, sizeof(b1)),
			pi.pulls);
		fprintf(f,
			"seed_errors: transport %" PRIu64 " checksum %" PRIu64
			" stalls %" PRIu64 "\n",
			pi.errors, pi.checksum_errors, pi.stalls);
	}
	if (unreachable)
		fprintf(f, "seed_control: no answer for %.1f s (%s)\n",
			(double)silent / 1e3, ctl_err);
	else
		fprintf(f, "seed_control: answers\n");
	pthread_mutex_lock(&s->lock);
	for (size_t k = 0; k < s->nknown; k++) {
		const struct rsrc_known *kn = &s->known[k];
		if (!kn->listed)
			continue;
		if (kn->used)
			fprintf(f,
				"seed_model: %s generation %" PRIu64
				" (content %016" PRIx64 ")\n",
				kn->name, kn->generation, kn->content);
		else
			fprintf(f,
				"seed_model: %s generation %" PRIu64
				" refused: %s\n",
				kn->name, kn->generation,
				*kn->why ? kn->why : "not looked at yet");
	}
	pthread_mutex_unlock(&s->lock);
}

/* One model: its current generation and identity, hidden or not, and
 * how many older generations open files still read. */
static void render_model(FILE *f, struct sfs_replica *r, struct sfs_model *mo,
			 size_t *older)
{
	pthread_mutex_lock(&mo->lock);
	const struct sfs_view *v = mo->current;
	if (!v) {
		char why[sizeof(mo->why)];
		snprintf(why, sizeof(why), "%s", mo->why);
		pthread_mutex_unlock(&mo->lock);
		fprintf(f, "model: %s (%s)\n", mo->name,
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
	fprintf(f,
		"model: %s generation %" PRIu64 " files %zu bytes %" PRIu64
		" tensors %zu sources %zu identity %s%s\n",
		m->model, v->generation, m->nfiles, bytes, m->ntensors, holders,
		m->id_short, mo->hidden ? " (hidden)" : "");
	fprintf(f,
		"identity: model=%s revision=%s dtype=%s quant=%s layout=%s "
		"layout_version=%" PRIu64 " tp=%" PRIu64 "/%" PRIu64
		" pp=%" PRIu64 "/%" PRIu64 " ep=%" PRIu64 "/%" PRIu64
		" framework=%s\n",
		id->model, id->revision[0] ? id->revision : "-",
		id->dtype[0] ? id->dtype : "-", id->quant, id->layout,
		id->layout_version, id->tp_rank, id->tp_size, id->pp_rank,
		id->pp_size, id->ep_rank, id->ep_size, id->framework);
	if (mo->hidden)
		fprintf(f, "hidden: %s: %s\n", mo->name, mo->why);
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
	size_t nsrcs = r->nsrcs, nmodels = r->nmodels;
	pthread_mutex_unlock(&r->lock);

	if (!(f = open_memstream(text, len)))
		return -ENOMEM;
	strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", gmtime(&r->mounted));
	uint64_t lookups = st.hits + st.misses;
	fprintf(f, "seedfs: %s\n", SEEDFS_VERSION);
	/* A mount, or what else runs the core (the engine API). */
	fprintf(f, "%s: %s (%.0f s ago)\n",
		strcmp(r->cfg.who, "seedfs mount") ? "started" : "mounted",
		when, up);
	if (ready)
		fprintf(f,
			"startup: ready in %.2f s (transport start-up %.2f "
			"s)\n",
			(double)ready / 1e3, (double)xport / 1e3);
	for (size_t i = 0; i < nsrcs; i++)
		render_source(f, r, r->srcs[i], st.queued);
	if (r->fleet) {
		char reg[1200];
		fleet_status(r, reg, sizeof(reg));
		fputs(reg, f);
	}
	fprintf(f, "protocol: %s (%s)\n", r->proto, r->provider);
	char sec[600];
	sfs_control_cred_describe(r->cfg.cred, sec, sizeof(sec));
	fprintf(f, "control_security: %s\n", sec);
	if (r->reseed)
		fprintf(f, "reseed: %s (serving what this mount holds)\n",
			sfs_reseed_address(r->reseed));
	if (r->control)
		fprintf(f, "control: %s\n", r->control);
	if (r->metrics_srv)
		fprintf(f, "metrics: http://%s/metrics\n", r->metrics_addr);
	size_t older = 0;
	for (size_t i = 0; i < nmodels; i++)
		render_model(f, r, r->models[i], &older);
	if (r->cfg.require_text)
		fprintf(f, "require: %s\n", r->cfg.require_text);
	fprintf(f, "older_generations_served: %zu\n", older);
	fprintf(f, "cache_size: %" PRIu64 " (%s)\n", st.size,
		sfs_fmt_bytes(st.size, b1, sizeof(b1)));
	if (st.ready < st.size)
		fprintf(f,
			"cache_ready: %" PRIu64 " (%s; the rest is being "
			"faulted in)\n",
			st.ready, sfs_fmt_bytes(st.ready, b2, sizeof(b2)));
	fprintf(f, "cache_used: %" PRIu64 " (%s)\n", st.used,
		sfs_fmt_bytes(st.used, b2, sizeof(b2)));
	fprintf(f, "chunk_size: %" PRIu64 "\n", st.chunk_size);
	fprintf(f, "cache_hits: %" PRIu64 "\n", st.hits);
	fprintf(f, "cache_misses: %" PRIu64 "\n", st.misses);
	fprintf(f, "cache_hit_rate: %.3f\n",
		lookups ? (double)st.hits / (double)lookups : 0.0);
	fprintf(f, "pulls: %" PRIu64 "\n", st.pulls);
	fprintf(f, "bytes_pulled: %" PRIu64 " (%s)\n", st.bytes_pulled,
		sfs_fmt_bytes(st.bytes_pulled, b1, sizeof(b1)));
	fprintf(f, "pull_rate_now: %.1f MB/s\n", rate_now / 1e6);
	fprintf(f, "pull_rate_avg: %.1f MB/s\n",
		up > 0 ? (double)st.bytes_pulled / up / 1e6 : 0.0);
	fprintf(f, "failovers: %" PRIu64 "\n", st.failovers);
	if (st.lane_own || st.lane_others)
		fprintf(f,
			"seed_pulls_shared: %" PRIu64
			" of this replica's lane, %" PRIu64
			" of others' (not waited for)\n",
			st.lane_own, st.lane_others);
	if (r->reseed)
		fprintf(f, "export_evictions: %" PRIu64 "\n",
			st.export_evictions);
	fprintf(f, "errors_transport: %" PRIu64 "\n", st.errors_transport);
	fprintf(f, "errors_timeout: %" PRIu64 "\n", st.timeouts);
	fprintf(f, "errors_checksum: %" PRIu64 "\n", st.checksum_errors);
	fprintf(f, "errors_unavailable: %" PRIu64 "\n", st.unavailable);
	fprintf(f, "errors_no_chunk: %" PRIu64 "\n", st.no_slot);
	fprintf(f, "reconnects: %" PRIu64 "\n", st.reconnects);
	fprintf(f, "reconnect_failures: %" PRIu64 "\n", st.reconnect_failures);
	if (r->disk) {
		uint64_t used, max;
		sfs_disk_usage(r->disk, &used, &max);
		fprintf(f, "disk_dir: %s\n", sfs_disk_path(r->disk));
		fprintf(f, "disk_used: %" PRIu64 " (%s)\n", used,
			sfs_fmt_bytes(used, b1, sizeof(b1)));
		fprintf(f, "disk_size: %" PRIu64 "%s\n", max,
			max ? "" : " (no bound)");
		fprintf(f, "disk_hits: %" PRIu64 "\n", st.disk_hits);
		fprintf(f, "disk_bytes_read: %" PRIu64 " (%s)\n",
			st.disk_bytes_read,
			sfs_fmt_bytes(st.disk_bytes_read, b1, sizeof(b1)));
		fprintf(f, "disk_stores: %" PRIu64 "\n", st.disk_stores);
		fprintf(f, "disk_bytes_written: %" PRIu64 " (%s)\n",
			st.disk_bytes_written,
			sfs_fmt_bytes(st.disk_bytes_written, b1, sizeof(b1)));
		fprintf(f, "disk_not_stored: %" PRIu64 "\n", st.disk_skipped);
		fprintf(f, "disk_queue: %" PRIu64 "\n", st.disk_queue);
		fprintf(f, "errors_disk: %" PRIu64 "\n", st.disk_errors);
		fprintf(f, "errors_disk_timeout: %" PRIu64 "\n",
			st.disk_timeouts);
	}
	if (fclose(f))
		return -ENOMEM;
	return 0;
}
