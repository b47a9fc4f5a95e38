/* SPDX-License-Identifier: MIT */
#include "replica/status.h"

#include "cache/cache.h"
#include "cache/disk.h"
#include "common/util.h"
#include "replica/gens.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void sfs_status_init(struct sfs_status *s)
{
	pthread_mutex_init(&s->lock, NULL);
	s->mounted = time(NULL);
	s->mounted_ns = sfs_now_ns();
	s->last_ns = s->mounted_ns;
}

void sfs_status_destroy(struct sfs_status *s)
{
	pthread_mutex_destroy(&s->lock);
}

/*
 * What is true now of the seed: the connection the current generation
 * reads through (up, reconnecting, down, and since when), what it
 * moves, and whether its control port answers.
 */
static void render_seed(FILE *f, struct sfs_status *s)
{
	struct sfs_cache_peer_info pi;
	uint32_t peer = sfs_gens_current_peer(s->gens);
	char err[512];
	uint64_t silent;

	if (sfs_cache_peer(s->cache, peer, &pi)) {
		fprintf(f, "seed: %s\n", s->seed);
		return;
	}
	if (pi.state == SFS_PEER_UP)
		fprintf(f, "seed: %s (reachable)\n", s->seed);
	else
		fprintf(f, "seed: %s (%s for %.1f s: %s)\n", s->seed,
			pi.state == SFS_PEER_DOWN ? "unreachable"
						  : "reconnecting",
			(double)pi.since_ms / 1e3, strerror(-pi.err));
	if (pi.any_ok)
		fprintf(f, "seed_last_pull: %.1f s ago\n",
			(double)pi.last_ok_ms / 1e3);
	else
		fprintf(f, "seed_last_pull: none yet\n");
	fprintf(f, "seed_rate: %.1f MB/s\n", pi.rate / 1e6);
	struct sfs_cache_stats st;
	sfs_cache_stats(s->cache, &st);
	fprintf(f,
		"seed_pulls: %u in flight (at most %u), %" PRIu64 " queued\n",
		pi.inflight, pi.window, st.queued);
	if (sfs_gens_control(s->gens, &silent, err, sizeof(err)))
		fprintf(f, "seed_control: no answer for %.1f s (%s)\n",
			(double)silent / 1e3, err);
	else
		fprintf(f, "seed_control: answers\n");
}

int sfs_status_render(void *arg, char **text, size_t *len)
{
	struct sfs_status *s = arg;
	struct sfs_cache_stats st;
	char when[32], b1[32], b2[32];
	FILE *f;

	sfs_cache_stats(s->cache, &st);
	uint64_t now = sfs_now_ns();
	double up = (double)(now - s->mounted_ns) / 1e9;
	/* The current rate: over the time since the last look, if that
	 * is long enough to mean something, else the last value. */
	pthread_mutex_lock(&s->lock);
	if (now - s->last_ns >= 200000000u) {
		s->rate_now = (double)(st.bytes_pulled - s->last_bytes) /
			      ((double)(now - s->last_ns) / 1e9);
		s->last_ns = now;
		s->last_bytes = st.bytes_pulled;
	}
	double rate_now = s->rate_now;
	pthread_mutex_unlock(&s->lock);

	if (!(f = open_memstream(text, len)))
		return -ENOMEM;
	strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", gmtime(&s->mounted));
	char model[512];
	size_t older;
	sfs_gens_summary(s->gens, model, sizeof(model), &older);
	uint64_t lookups = st.hits + st.misses;
	fprintf(f, "seedfs: %s\n", SEEDFS_VERSION);
	fprintf(f, "mounted: %s (%.0f s ago)\n", when, up);
	pthread_mutex_lock(&s->lock);
	uint64_t ready = s->ready_ms, xport = s->transport_ms;
	pthread_mutex_unlock(&s->lock);
	if (ready)
		fprintf(f,
			"startup: ready in %.2f s (transport start-up %.2f "
			"s)\n",
			(double)ready / 1e3, (double)xport / 1e3);
	render_seed(f, s);
	fprintf(f, "protocol: %s (%s)\n", s->protocol, s->provider);
	if (s->control)
		fprintf(f, "control: %s\n", s->control);
	fprintf(f, "model: %s\n", model);
	char ident[600];
	sfs_gens_identity(s->gens, ident, sizeof(ident));
	fprintf(f, "identity: %s\n", ident);
	if (s->require) {
		char why[256];
		fprintf(f, "require: %s\n", s->require);
		if (sfs_gens_hidden(s->gens, why, sizeof(why)))
			fprintf(f, "hidden: %s: %s\n", s->seed, why);
	}
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
	fprintf(f, "errors_transport: %" PRIu64 "\n", st.errors_transport);
	fprintf(f, "errors_timeout: %" PRIu64 "\n", st.timeouts);
	fprintf(f, "errors_checksum: %" PRIu64 "\n", st.checksum_errors);
	fprintf(f, "errors_unavailable: %" PRIu64 "\n", st.unavailable);
	fprintf(f, "errors_no_chunk: %" PRIu64 "\n", st.no_slot);
	fprintf(f, "reconnects: %" PRIu64 "\n", st.reconnects);
	fprintf(f, "reconnect_failures: %" PRIu64 "\n", st.reconnect_failures);
	if (s->disk) {
		uint64_t used, max;
		sfs_disk_usage(s->disk, &used, &max);
		fprintf(f, "disk_dir: %s\n", sfs_disk_path(s->disk));
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
