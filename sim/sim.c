/* SPDX-License-Identifier: MIT */
/*
 * sim.c - the swarm at fleet scale, simulated: one seed and N replicas
 * that load one model together, over modelled links (each host's uplink
 * and downlink, a latency per pull).  Which source each replica pulls
 * each chunk from is decided by the cache's own policy (cache/swarm.c,
 * sfs_swarm_takes: lanes, relay trees, when a seed takes a chunk),
 * linked in, not copied; what the simulator models is the rest:
 *
 *   - links: a host's uplink is shared equally by the pulls it serves,
 *     its downlink by the pulls it receives; a pull runs at the smaller
 *     share (recomputed whenever a pull starts or ends at either host),
 *     after one latency;
 *   - who knows whom: the seed lists each replica the 16 re-seeders
 *     that rank first for it (rendezvous hashing, as seed/announce.c
 *     does, unkeyed here);
 *     a replica uses the first K of them (8, replica/source.c's cap);
 *     its lanes are those members and itself, in key order;
 *   - what a replica knows of a member's holdings: as of its last
 *     question (every 250 ms, as replica/source.c asks; --poll-ms),
 *     each answer costing a fixed part plus 4 bytes a chunk that
 *     changed (form 2 of the holdings, unit_holdruns' measure);
 *   - each peer's window: 32 pulls in flight (cache/peer.c's WINDOW_MAX;
 *     a quarter second of these links' rate is more);
 *   - the replica's queue: the model in order, from its first chunk not
 *     held, QUEUE chunks at most looked at (its read-ahead).
 *
 *   sim [-n N] [--size BYTES] [--chunk BYTES] [--gbit G] [--seed-x X]
 *       [--lat-us US] [--stagger-ms MS] [--chunks C] [--queue CHUNKS]
 *       [--lanes members|fleet] [--poll-ms MS] [--label TEXT]
 *       [--progress MS]
 *
 * Prints one row: all done (s), one replica alone (s), their ratio,
 * seed sent x model, control bytes / data bytes, what bound the run.
 * With --progress, a line to stderr every MS simulated: where the run
 * is (the seed's uplink, its chunks sent more than once, the replicas'
 * holdings and downlinks), to see what takes the time.
 */
#include "cache/swarm.h"
#include "common/xxh.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LISTED 16	    /* re-seeders the seed lists one asker */
#define MEMBERS_MAX 8	    /* re-seeders one replica works with */
#define WINDOW_MIN 2	    /* pulls in flight per peer: at least, */
#define WINDOW_MAX 32	    /* at most (a seed), */
#define WINDOW_MEMBER_MAX 8 /* a member (cache/peer.c's) */
#define WINDOW_MS 250.0	    /* and a quarter second of its rate */
#define ANSWER_FIXED 400    /* bytes of a question and its answer */
#define ANSWER_PER_CHANGE 4 /* bytes per chunk that changed */
#define FLEET_MEMBERS 16    /* --lanes fleet: offsets -1, -2, -4, ... */
#define HOLDERS (FLEET_MEMBERS + 1)

struct flow {
	uint32_t from, to; /* nodes */
	double posted;
	uint32_t chunk;
	double rem;    /* bytes left */
	double rate;   /* bytes per ms */
	double at;     /* rem as of then */
	double due;    /* when it next needs looking at */
	uint32_t hpos; /* its place in fheap, or UINT32_MAX */
	int started;   /* past its latency */
	uint32_t next_free;
	uint32_t up_i, down_i; /* its place in its nodes' lists */
};

struct node {
	double up, down;     /* bytes per ms */
	uint8_t *has;	     /* per chunk: 1 held, 2 coming */
	uint64_t *hasbits;   /* per chunk: has[] is not 0 (the scans'; the
				seed's: NULL, never scanned) */
	uint32_t *log, nlog; /* its changes (chunk << 1 | held), in order */
	uint32_t nheld;
	double grew_ms;
	double start_ms, done_ms;
	/* flows */
	uint32_t *ups, nups, cap_ups;
	uint32_t *downs, ndowns, cap_downs;
	double sent;		       /* bytes served */
	double shared_up, shared_down; /* the shares rates were set at */
	/* replicas: the view */
	uint32_t holder_node[HOLDERS]; /* holder h -> node (0: the seed) */
	uint32_t nholders;
	uint32_t inflight[HOLDERS], window[HOLDERS];
	double rate[HOLDERS], last_done[HOLDERS]; /* bytes per ms */
	struct sfs_cache_lane *lanes; /* HOLDERS, or n with --lanes fleet */
	size_t nlanes, lane_me;
	size_t member_lane[HOLDERS];
	uint8_t *seen[HOLDERS];	     /* holder h's holdings as last asked */
	uint64_t *seenbits[HOLDERS]; /* seen[h][] is 1 (the scans') */
	uint32_t seen_log[HOLDERS];  /* of its log: how much that was */
	/* v_member's answers: grew_ms as of the last question, lat_ms a
	 * pull's time from it (average) */
	struct sfs_swarm_member member[HOLDERS];
	double asked_ms;
	uint32_t *held_ms, *coming_ms, *lost_ms; /* per chunk (in/out) */
	uint32_t cursor;			 /* first chunk not held */
	uint32_t pos[HOLDERS], pos_help;	 /* scans go on from here */
	double wake_ms;
	double control; /* bytes */
	uint32_t rr;
	uint32_t *watchers, nwatchers; /* replicas that have it as member */
};

struct event {
	double t;
	uint32_t kind; /* 1 wake, 2 ask */
	uint32_t id;
};

static struct node *nodes;
static uint32_t nnodes, nchunks;
static double chunk_bytes, lat_ms;
static struct flow *flows;
static uint32_t nflows, cap_flows, free_flow = UINT32_MAX;
static struct event *heap; /* wakes and questions */
static size_t nheap, cap_heap;
/* Flows by .due: one entry each, moved in place when it changes. */
static uint32_t *fheap, nfheap;
static double now;
static uint64_t policy_calls;
static uint32_t queue_len = 4096; /* queued chunks looked at per pick */
static int fleet_lanes;		  /* --lanes fleet */
/* Holdings asked this often (--poll-ms; RSRC_RESEEDER_POLL_MS). */
static double poll_ms = 250;
/* --progress: a line every this many simulated ms (0: none); the
 * seed's chunks sent once, and how many it sent again. */
static double progress_ms;
static uint8_t *seed_once;
static uint64_t seed_again;
static uint32_t ndone;	    /* replicas that hold the whole model */
static double seed_last_ms; /* when the seed's last pull ended */

static void *xalloc(size_t n)
{
	void *p = calloc(1, n ? n : 1);
	if (!p) {
		fprintf(stderr, "sim: out of memory\n");
		exit(2);
	}
	return p;
}

static uint64_t *bits_alloc(uint32_t n)
{
	return xalloc(((size_t)n + 63) / 64 * sizeof(uint64_t));
}

static void push(double t, uint32_t kind, uint32_t id)
{
	if (nheap == cap_heap) {
		cap_heap = cap_heap ? 2 * cap_heap : 1024;
		heap = realloc(heap, cap_heap * sizeof(*heap));
		if (!heap)
			exit(2);
	}
	size_t i = nheap++;
	while (i && heap[(i - 1) / 2].t > t) {
		heap[i] = heap[(i - 1) / 2];
		i = (i - 1) / 2;
	}
	heap[i] = (struct event){t, kind, id};
}

static struct event pop(void)
{
	struct event top = heap[0], last = heap[--nheap];
	size_t i = 0;
	for (;;) {
		size_t l = 2 * i + 1, m = l + 1, s = i;
		double ts = last.t;
		if (l < nheap && heap[l].t < ts)
			s = l, ts = heap[l].t;
		if (m < nheap && heap[m].t < ts)
			s = m;
		if (s == i)
			break;
		heap[i] = heap[s];
		i = s;
	}
	if (nheap)
		heap[i] = last;
	return top;
}

static void fheap_set(uint32_t i, uint32_t fi)
{
	fheap[i] = fi;
	flows[fi].hpos = i;
}

static void fheap_fix(uint32_t i)
{
	uint32_t fi = fheap[i];
	double t = flows[fi].due;
	while (i && flows[fheap[(i - 1) / 2]].due > t) {
		fheap_set(i, fheap[(i - 1) / 2]);
		i = (i - 1) / 2;
	}
	for (;;) {
		uint32_t l = 2 * i + 1, m = l + 1, s = i;
		double ts = t;
		if (l < nfheap && flows[fheap[l]].due < ts)
			s = l, ts = flows[fheap[l]].due;
		if (m < nfheap && flows[fheap[m]].due < ts)
			s = m;
		if (s == i)
			break;
		fheap_set(i, fheap[s]);
		i = s;
	}
	fheap_set(i, fi);
}

/* Flow @fi is due at @t (added, or moved). */
static void fheap_due(uint32_t fi, double t)
{
	flows[fi].due = t;
	if (flows[fi].hpos == UINT32_MAX) {
		fheap_set(nfheap++, fi);
		fheap_fix(nfheap - 1);
	} else {
		fheap_fix(flows[fi].hpos);
	}
}

static void fheap_remove(uint32_t fi)
{
	uint32_t i = flows[fi].hpos;
	flows[fi].hpos = UINT32_MAX;
	if (i == --nfheap)
		return;
	fheap_set(i, fheap[nfheap]);
	fheap_fix(i);
}

static void list_add(uint32_t **a, uint32_t *n, uint32_t *cap, uint32_t v,
		     uint32_t *where)
{
	if (*n == *cap) {
		*cap = *cap ? 2 * *cap : 8;
		*a = realloc(*a, *cap * sizeof(**a));
		if (!*a)
			exit(2);
	}
	*where = *n;
	(*a)[(*n)++] = v;
}

static void bit_set(uint64_t *bits, uint32_t c, int on)
{
	if (on)
		bits[c >> 6] |= 1ull << (c & 63);
	else
		bits[c >> 6] &= ~(1ull << (c & 63));
}

/* Node @n's holding of chunk @c becomes @v (1 held, 2 coming): what
 * its members learn at their next question. */
static void set_has(uint32_t n, uint32_t c, uint8_t v)
{
	struct node *x = &nodes[n];
	x->has[c] = v;
	bit_set(x->hasbits, c, v != 0);
	if (n)
		x->log[x->nlog++] = c << 1 | (v == 1);
}

/* The policy's view of replica @arg's holders. */
static int v_has(void *arg, uint32_t h, uint32_t obj, uint64_t idx, int coming)
{
	struct node *r = arg;
	(void)obj;
	if (h == 0)
		return !coming; /* the seed holds all */
	uint8_t s = r->seen[h][idx];
	return coming ? s == 2 : s == 1;
}

static int v_member(void *arg, uint32_t h, struct sfs_swarm_member *m)
{
	struct node *r = arg;
	if (h >= r->nholders)
		return -ENOENT;
	*m = r->member[h];
	return 0;
}

/* What the policy is told of replica @r's holders: their grew_ms as of
 * the last answer (ask()), their pulls' time as measured (arrived(); 0
 * before the first, as the cache says). */
static void set_members(struct node *r)
{
	for (uint32_t h = 0; h < r->nholders; h++)
		r->member[h] = (struct sfs_swarm_member){
			.peer = h,
			.lane = h ? r->member_lane[h] : SIZE_MAX,
			.last_resort = h == 0,
			.proven = h == 0,
			.answers = 1};
}

static const struct sfs_swarm_ops ops = {.has = v_has, .member = v_member};
static const uint64_t base0[1] = {0};

/* Share of flow @f now: the smaller of its two hosts' shares. */
static double share(const struct flow *f)
{
	const struct node *a = &nodes[f->from], *b = &nodes[f->to];
	double u = a->up / (a->nups ? a->nups : 1);
	double d = b->down / (b->ndowns ? b->ndowns : 1);
	return u < d ? u : d;
}

static void reschedule(uint32_t fi)
{
	struct flow *f = &flows[fi];
	if (!f->started)
		return;
	f->rem -= f->rate * (now - f->at);
	if (f->rem < 0)
		f->rem = 0;
	f->at = now;
	f->rate = share(f);
	fheap_due(fi, now + f->rem / f->rate);
}

/* A host's share per pull changed: its pulls' rates are computed anew,
 * but only once the share moved by more than RESHARE (a host serving a
 * thousand pulls would otherwise reschedule them all at each start and
 * end): rates are within that of the exact share. */
#define RESHARE 0.02

/* The pulls in @list (@n of them) share @cap: recomputed if their
 * share moved past RESHARE from *@shared. */
static void reshare(double cap, const uint32_t *list, uint32_t n,
		    double *shared)
{
	double sh = cap / (n ? n : 1);
	if (fabs(sh - *shared) <= RESHARE * *shared)
		return;
	*shared = sh;
	for (uint32_t i = 0; i < n; i++)
		reschedule(list[i]);
}

static void reshare_up(uint32_t n)
{
	struct node *x = &nodes[n];
	reshare(x->up, x->ups, x->nups, &x->shared_up);
}

static void reshare_down(uint32_t n)
{
	struct node *x = &nodes[n];
	reshare(x->down, x->downs, x->ndowns, &x->shared_down);
}

static void flow_start(uint32_t from, uint32_t to, uint32_t chunk)
{
	uint32_t fi;
	if (free_flow != UINT32_MAX) {
		fi = free_flow;
		free_flow = flows[fi].next_free;
	} else {
		if (nflows == cap_flows) {
			cap_flows = cap_flows ? 2 * cap_flows : 1024;
			flows = realloc(flows, cap_flows * sizeof(*flows));
			fheap = realloc(fheap, cap_flows * sizeof(*fheap));
			if (!flows || !fheap)
				exit(2);
		}
		fi = nflows++;
	}
	struct flow *f = &flows[fi];
	*f = (struct flow){.from = from,
			   .to = to,
			   .posted = now,
			   .chunk = chunk,
			   .rem = chunk_bytes,
			   .hpos = UINT32_MAX};
	/* The request's way there first. */
	fheap_due(fi, now + lat_ms);
}

static void flow_attach(uint32_t fi)
{
	struct flow *f = &flows[fi];
	struct node *a = &nodes[f->from], *b = &nodes[f->to];
	f->started = 1;
	f->at = now;
	list_add(&a->ups, &a->nups, &a->cap_ups, fi, &f->up_i);
	list_add(&b->downs, &b->ndowns, &b->cap_downs, fi, &f->down_i);
	reshare_up(f->from);
	reshare_down(f->to);
	reschedule(fi); /* its own rate, at once */
}

static void flow_detach(uint32_t fi)
{
	struct flow *f = &flows[fi];
	struct node *a = &nodes[f->from], *b = &nodes[f->to];
	uint32_t last = a->ups[--a->nups];
	if (f->up_i != a->nups) {
		a->ups[f->up_i] = last;
		flows[last].up_i = f->up_i;
	}
	last = b->downs[--b->ndowns];
	if (f->down_i != b->ndowns) {
		b->downs[f->down_i] = last;
		flows[last].down_i = f->down_i;
	}
	fheap_remove(fi);
	f->next_free = free_flow;
	free_flow = fi;
	reshare_up(f->from);
	reshare_down(f->to);
}

static void pump(uint32_t ri, int rescan);

/* Replica @ri asks its members what they hold (every poll_ms). */
static void ask(uint32_t ri)
{
	struct node *r = &nodes[ri];
	if (r->done_ms > 0)
		return;
	for (uint32_t h = 1; h < r->nholders; h++) {
		struct node *m = &nodes[r->holder_node[h]];
		/* The answer: what changed there since the last one (form 2
		 * of the holdings). */
		uint32_t changed = m->nlog - r->seen_log[h];
		for (uint32_t i = r->seen_log[h]; i < m->nlog; i++) {
			uint32_t c = m->log[i] >> 1;
			r->seen[h][c] = m->log[i] & 1 ? 1 : 2;
			bit_set(r->seenbits[h], c, m->log[i] & 1);
		}
		r->seen_log[h] = m->nlog;
		r->member[h].grew_ms = (uint64_t)m->grew_ms;
		r->control += ANSWER_FIXED + ANSWER_PER_CHANGE * changed;
	}
	r->asked_ms = now;
	push(now + poll_ms, 2, ri);
	pump(ri, 1);
}

/* The first chunk of [@c, @end) not held (nor coming) at replica @r
 * that holder @h holds as last asked (the seed: any), or @end: has[]
 * and seen[] read 64 chunks at a time through their bitmaps. */
static uint32_t next_candidate(const struct node *r, uint32_t h, uint32_t c,
			       uint32_t end)
{
	if (c >= end)
		return end;
	uint64_t w = ~r->hasbits[c >> 6] & (~0ull << (c & 63));
	for (;;) {
		if (h)
			w &= r->seenbits[h][c >> 6];
		if (w)
			break;
		c = (c | 63) + 1;
		if (c >= end)
			return end;
		w = ~r->hasbits[c >> 6];
	}
	c = (c & ~63u) + (uint32_t)__builtin_ctzll(w);
	return c < end ? c : end;
}

/* The first chunk from holder @h of replica @r, from its scan position
 * on, that the policy takes (@help: a seed's second pass), or
 * UINT32_MAX. */
static uint32_t pick(struct node *r, struct sfs_swarm *sw, uint32_t h, int help)
{
	struct sfs_swarm_member pm;
	v_member(r, h, &pm);
	uint32_t *pos = help ? &r->pos_help : &r->pos[h];
	uint32_t end = nchunks - r->cursor > queue_len ? r->cursor + queue_len
						       : nchunks,
		 c = *pos;
	if (c < r->cursor)
		c = r->cursor;
	for (; (c = next_candidate(r, h, c, end)) < end; c++) {
		struct sfs_swarm_chunk q = {.idx = c,
					    .avoid = SFS_CACHE_NONE,
					    .queued_ms = (uint64_t)r->start_ms,
					    .held_ms = r->held_ms[c],
					    .coming_ms = r->coming_ms[c],
					    .lost_ms = r->lost_ms[c]};
		policy_calls++;
		int t = sfs_swarm_takes(sw, &q, &pm, h, help);
		r->held_ms[c] = (uint32_t)q.held_ms;
		r->coming_ms[c] = (uint32_t)q.coming_ms;
		r->lost_ms[c] = (uint32_t)q.lost_ms;
		if (t) {
			*pos = c + 1;
			return c;
		}
	}
	*pos = c;
	return UINT32_MAX;
}

/*
 * Post what replica @ri's peers take while their windows have room,
 * one chunk a peer a turn (cache/peer.c's pump).  A chunk the policy
 * turned down stays so until what it decided on changes: a member's
 * holdings (an answer to a question: @rescan) or a wait's end (a wake:
 * @rescan); between those each peer's scan goes on from where it was.
 */
static void pump(uint32_t ri, int rescan)
{
	struct node *r = &nodes[ri];
	if (r->done_ms > 0 || now < r->start_ms)
		return;
	uint32_t hs[HOLDERS];
	for (uint32_t h = 0; h < r->nholders; h++)
		hs[h] = h;
	struct sfs_swarm sw = {.ops = &ops,
			       .arg = r,
			       .holders = hs,
			       .nholders = r->nholders,
			       .base = base0,
			       .nobjs = 1,
			       .nchunks = nchunks,
			       .fleet = fleet_lanes,
			       .lanes = r->lanes,
			       .nlanes = r->nlanes,
			       .lane_me = r->lane_me,
			       .seed_lat_ms = r->member[0].lat_ms,
			       .now = (uint64_t)now};
	while (r->cursor < nchunks && r->has[r->cursor] == 1)
		r->cursor++;
	if (rescan) {
		for (uint32_t h = 0; h < r->nholders; h++)
			r->pos[h] = r->cursor;
		r->pos_help = r->cursor;
	}
	int posted = 1;
	while (posted) {
		posted = 0;
		for (uint32_t k = 0; k < r->nholders; k++) {
			uint32_t h = (r->rr + k) % r->nholders;
			/* A member that has not served yet probes with one
			 * pull at a time (cache/peer.c). */
			if (r->inflight[h] >=
			    (r->member[h].proven ? r->window[h] : 1))
				continue;
			uint32_t c = pick(r, &sw, h, 0);
			if (c == UINT32_MAX && h == 0)
				c = pick(r, &sw, h, 1);
			if (c == UINT32_MAX)
				continue;
			set_has(ri, c, 2);
			r->grew_ms = now; /* coming counts as growing */
			if (!r->inflight[h]++)
				r->last_done[h] = now; /* busy from now */
			flow_start(r->holder_node[h], ri, c);
			posted = 1;
		}
		r->rr++;
	}
	if (sw.wake_ms && (double)sw.wake_ms > now &&
	    (r->wake_ms <= now || (double)sw.wake_ms < r->wake_ms)) {
		r->wake_ms = (double)sw.wake_ms;
		push(r->wake_ms, 1, ri);
	}
}

static void arrived(uint32_t fi)
{
	struct flow *f = &flows[fi];
	uint32_t ri = f->to, from = f->from, c = f->chunk;
	double took = now - f->posted;
	struct node *r = &nodes[ri];
	nodes[from].sent += chunk_bytes;
	if (from == 0)
		seed_last_ms = now;
	if (from == 0 && seed_once) {
		seed_again += seed_once[c];
		seed_once[c] = 1;
	}
	flow_detach(fi);
	set_has(ri, c, 1);
	r->nheld++;
	r->grew_ms = now;
	for (uint32_t h = 0; h < r->nholders; h++)
		if (r->holder_node[h] == from) {
			/* Its rate while busy, and the window from it (as
			 * cache/peer.c sizes it). */
			if (r->last_done[h] > 0 && now > r->last_done[h]) {
				double x =
					chunk_bytes / (now - r->last_done[h]);
				r->rate[h] = r->rate[h] > 0 ? 0.8 * r->rate[h] +
								      0.2 * x
							    : x;
				double w = WINDOW_MS * r->rate[h] / chunk_bytes;
				double max = h ? WINDOW_MEMBER_MAX : WINDOW_MAX;
				r->window[h] = w < WINDOW_MIN ? WINDOW_MIN
					       : w > max      ? (uint32_t)max
							      : (uint32_t)w;
			}
			r->last_done[h] = now;
			r->inflight[h]--;
			/* Its pulls' usual time, as the cache measures it
			 * (the policy's waits follow it). */
			double *lat = &r->member[h].lat_ms;
			*lat = *lat > 0 ? 0.8 * *lat + 0.2 * took : took;
			/* A member proves itself by serving (cache/peer.c):
			 * from now on it keeps the seed off what it holds. */
			r->member[h].proven = 1;
			break;
		}
	if (r->nheld == nchunks) {
		r->done_ms = now;
		ndone++;
	}
	pump(ri, 0);
}

/* Rendezvous rank of re-seeder @m for asker @a, as the seed ranks (it
 * hashes the addresses under its ring secret first). */
static uint64_t rank_of(uint32_t a, uint32_t m)
{
	char as[32], ms[32];
	int al = snprintf(as, sizeof(as), "10.%u.%u.%u:7070", a >> 16,
			  (a >> 8) & 255, a & 255);
	int ml = snprintf(ms, sizeof(ms), "10.%u.%u.%u:7070", m >> 16,
			  (m >> 8) & 255, m & 255);
	return XXH3_64bits_withSeed(ms, (size_t)ml,
				    XXH3_64bits(as, (size_t)al));
}

struct ranked {
	uint64_t score;
	uint32_t node;
};

static int by_score(const void *a, const void *b)
{
	const struct ranked *x = a, *y = b;
	return x->score < y->score ? 1 : x->score > y->score ? -1 : 0;
}

static int by_key(const void *a, const void *b)
{
	const struct sfs_cache_lane *x = a, *y = b;
	return x->key < y->key ? -1 : x->key > y->key;
}

static void setup_views(uint32_t n)
{
	struct ranked *rk = xalloc(n * sizeof(*rk));
	for (uint32_t ri = 1; ri <= n; ri++) {
		struct node *r = &nodes[ri];
		size_t k = 0, use;
		if (fleet_lanes) {
			/* The replicas at ring offsets -1, -2, -4, ... in key
			 * order: each chunk's binomial tree parent. */
			for (uint64_t off = 1; off < n && k < FLEET_MEMBERS;
			     off <<= 1)
				rk[k++] = (struct ranked){
					0,
					(uint32_t)((ri - 1 + n - off) % n) + 1};
			use = k;
		} else {
			for (uint32_t m = 1; m <= n; m++)
				if (m != ri)
					rk[k++] = (struct ranked){
						rank_of(ri, m), m};
			qsort(rk, k, sizeof(*rk), by_score);
			use = k < LISTED ? k : LISTED;
			use = use < MEMBERS_MAX ? use : MEMBERS_MAX;
		}
		r->holder_node[0] = 0;
		r->nholders = 1;
		for (size_t i = 0; i < use; i++) {
			uint32_t m = rk[i].node;
			r->holder_node[r->nholders++] = m;
			struct node *mn = &nodes[m];
			mn->watchers =
				realloc(mn->watchers,
					(mn->nwatchers + 1) * sizeof(uint32_t));
			mn->watchers[mn->nwatchers++] = ri;
		}
		/* Lanes: the members and this replica, in key order (the
		 * key: the node number).  --lanes fleet: every replica, the
		 * ones it does not work with as members not connected
		 * (SFS_CACHE_LANE_UNKNOWN): what the replicas would set if
		 * the seed told each the fleet's lanes (F5, not built). */
		if (fleet_lanes) {
			r->nlanes = n;
			r->lanes = xalloc(n * sizeof(*r->lanes));
			for (uint32_t m = 1; m <= n; m++)
				r->lanes[m - 1] = (struct sfs_cache_lane){
					.key = m,
					.holder =
						m == ri ? SFS_CACHE_NONE
							: SFS_CACHE_LANE_UNKNOWN};
			for (uint32_t h = 1; h < r->nholders; h++)
				r->lanes[r->holder_node[h] - 1].holder = h;
		} else {
			r->nlanes = r->nholders;
			r->lanes = xalloc(HOLDERS * sizeof(*r->lanes));
			r->lanes[0] = (struct sfs_cache_lane){
				.key = ri, .holder = SFS_CACHE_NONE};
			for (uint32_t h = 1; h < r->nholders; h++)
				r->lanes[h] = (struct sfs_cache_lane){
					.key = r->holder_node[h], .holder = h};
			qsort(r->lanes, r->nlanes, sizeof(r->lanes[0]), by_key);
		}
		r->lane_me = SIZE_MAX;
		for (size_t i = 0; i < r->nlanes; i++) {
			if (r->lanes[i].holder == SFS_CACHE_NONE)
				r->lane_me = i;
			else if (r->lanes[i].holder < HOLDERS)
				r->member_lane[r->lanes[i].holder] = i;
		}
		if (n == 1)
			r->nlanes = 0, r->lane_me = SIZE_MAX;
	}
	free(rk);
}

static void usage(void)
{
	fprintf(stderr,
		"usage: sim [-n N] [--size BYTES] [--chunk BYTES] [--gbit G] "
		"[--seed-x X] [--lat-us US] [--stagger-ms MS] [--chunks C] "
		"[--label TEXT] [--queue CHUNKS] [--lanes members|fleet] "
		"[--poll-ms MS] [--progress MS]\n");
	exit(2);
}

/* --progress: one line on where the run is at @now, and since the last
 * (@last_*). */
static void progress(uint32_t n, double link, double *last_t, double *last_sent,
		     uint64_t *last_held)
{
	uint64_t held = 0;
	uint32_t least = UINT32_MAX, done = 0;
	for (uint32_t i = 1; i <= n; i++) {
		held += nodes[i].nheld;
		least = nodes[i].nheld < least ? nodes[i].nheld : least;
		done += nodes[i].done_ms > 0;
	}
	double dt = now - *last_t;
	double model = chunk_bytes * nchunks, up = 0;
	for (uint32_t k = 0; k < nodes[0].nups; k++)
		up += flows[nodes[0].ups[k]].started
			      ? flows[nodes[0].ups[k]].rate
			      : 0;
	fprintf(stderr,
		"sim: %7.2f s: seed sent %.3f x (its uplink %3.0f %% busy now), "
		"%u pulls in flight, %" PRIu64 " chunks sent again; replicas "
		"%u done, held %.1f %% (the least %.1f %%), their downlinks "
		"%3.0f %% busy since\n",
		now / 1e3, nodes[0].sent / model, 100 * up / nodes[0].up,
		nodes[0].nups, seed_again, done,
		100.0 * (double)held / ((double)n * nchunks),
		100.0 * least / nchunks,
		dt > 0 ? 100 * (double)(held - *last_held) * chunk_bytes /
				 ((double)n * link * dt)
		       : 0);
	*last_t = now;
	*last_sent = nodes[0].sent;
	*last_held = held;
}

static double parse_bytes(const char *s)
{
	char *end;
	double v = strtod(s, &end);
	switch (*end) {
	case 'G':
		v *= 1024.0 * 1024 * 1024;
		break;
	case 'M':
		v *= 1024.0 * 1024;
		break;
	case 'K':
		v *= 1024.0;
		break;
	case 0:
		break;
	default:
		usage();
	}
	return v;
}

int main(int argc, char **argv)
{
	uint32_t n = 8, cap_chunks = 0;
	double size = 140e9, gbit = 100, seed_x = 1, lat_us = 20, stagger = 0;
	const char *label = "";
	chunk_bytes = 1024.0 * 1024;
	static const struct option lo[] = {{"size", 1, 0, 's'},
					   {"chunk", 1, 0, 'c'},
					   {"gbit", 1, 0, 'g'},
					   {"seed-x", 1, 0, 'x'},
					   {"lat-us", 1, 0, 'l'},
					   {"stagger-ms", 1, 0, 't'},
					   {"chunks", 1, 0, 'k'},
					   {"label", 1, 0, 'L'},
					   {"queue", 1, 0, 'q'},
					   {"lanes", 1, 0, 'a'},
					   {"poll-ms", 1, 0, 'p'},
					   {"progress", 1, 0, 'P'},
					   {0, 0, 0, 0}};
	for (int o; (o = getopt_long(argc, argv, "n:", lo, NULL)) != -1;) {
		switch (o) {
		case 'n':
			n = (uint32_t)strtoul(optarg, NULL, 10);
			break;
		case 's':
			size = parse_bytes(optarg);
			break;
		case 'c':
			chunk_bytes = parse_bytes(optarg);
			break;
		case 'g':
			gbit = strtod(optarg, NULL);
			break;
		case 'x':
			seed_x = strtod(optarg, NULL);
			break;
		case 'l':
			lat_us = strtod(optarg, NULL);
			break;
		case 't':
			stagger = strtod(optarg, NULL);
			break;
		case 'k':
			cap_chunks = (uint32_t)strtoul(optarg, NULL, 10);
			break;
		case 'L':
			label = optarg;
			break;
		case 'q':
			queue_len = (uint32_t)strtoul(optarg, NULL, 10);
			break;
		case 'p': {
			char *end;
			poll_ms = strtod(optarg, &end);
			if (*end || !(poll_ms >= 1 && poll_ms <= 60000))
				usage();
			break;
		}
		case 'P': {
			char *end;
			progress_ms = strtod(optarg, &end);
			if (*end || !(progress_ms >= 1))
				usage();
			break;
		}
		case 'a':
			if (strcmp(optarg, "fleet") &&
			    strcmp(optarg, "members"))
				usage();
			fleet_lanes = !strcmp(optarg, "fleet");
			break;
		default:
			usage();
		}
	}
	if (n < 1 || n > 100000 || chunk_bytes < 1 || size < chunk_bytes ||
	    (fleet_lanes && n > 65536)) /* (members up to offset 2^15) */
		usage();
	uint64_t all_chunks = (uint64_t)ceil(size / chunk_bytes);
	if (all_chunks > (1u << 30) &&
	    (!cap_chunks || cap_chunks > (1u << 30))) {
		fprintf(stderr, "sim: %" PRIu64 " chunks: at most 2^30\n",
			all_chunks);
		return 2;
	}
	nchunks =
		(uint32_t)(cap_chunks && cap_chunks < all_chunks ? cap_chunks
								 : all_chunks);
	lat_ms = lat_us / 1000.0;
	double link = gbit * 1e9 / 8 / 1000; /* bytes per ms */
	nnodes = n + 1;
	nodes = xalloc(nnodes * sizeof(*nodes));
	nodes[0].up = link * seed_x;
	nodes[0].down = link * seed_x;
	nodes[0].has = xalloc(nchunks);
	memset(nodes[0].has, 1, nchunks);
	for (uint32_t i = 1; i <= n; i++) {
		struct node *r = &nodes[i];
		r->up = r->down = link;
		r->has = xalloc(nchunks);
		r->hasbits = bits_alloc(nchunks);
		r->log = xalloc(2 * (size_t)nchunks * sizeof(uint32_t));
		r->held_ms = xalloc(nchunks * sizeof(uint32_t));
		r->coming_ms = xalloc(nchunks * sizeof(uint32_t));
		r->lost_ms = xalloc(nchunks * sizeof(uint32_t));
		r->start_ms = stagger * (i - 1);
	}
	setup_views(n);
	for (uint32_t i = 1; i <= n; i++) {
		struct node *r = &nodes[i];
		for (uint32_t h = 1; h < r->nholders; h++) {
			r->seen[h] = xalloc(nchunks);
			r->seenbits[h] = bits_alloc(nchunks);
		}
		for (uint32_t h = 0; h < r->nholders; h++)
			r->window[h] = 4;
		set_members(r);
		push(r->start_ms, 2, i);
	}
	double link_ms = chunk_bytes * nchunks / link;
	double limit = 50 * link_ms + stagger * n + 60e3;
	double next_progress = progress_ms, last_t = 0, last_sent = 0;
	uint64_t last_held = 0;
	if (progress_ms)
		seed_once = xalloc(nchunks);
	while (nheap || nfheap) {
		if (progress_ms && now >= next_progress && ndone < n) {
			progress(n, link, &last_t, &last_sent, &last_held);
			next_progress += progress_ms;
		}
		if (nfheap && (!nheap || flows[fheap[0]].due <= heap[0].t)) {
			uint32_t fi = fheap[0];
			now = flows[fi].due;
			if (now > limit)
				break; /* what is unfinished then is said */
			if (!flows[fi].started)
				flow_attach(fi);
			else
				arrived(fi);
			continue;
		}
		struct event e = pop();
		now = e.t;
		if (now > limit)
			break;
		if (e.kind == 1) {
			if (nodes[e.id].wake_ms == e.t)
				pump(e.id, 1);
		} else {
			ask(e.id);
		}
	}
	/* The slowest replica's time from its start (one unfinished: till
	 * the end), and the whole run's. */
	double last = 0, ctl = 0, end = 0;
	uint32_t unfinished = 0;
	for (uint32_t i = 1; i <= n; i++) {
		double done = nodes[i].done_ms;
		if (done <= 0) {
			unfinished++;
			done = now;
		}
		double took = done - nodes[i].start_ms;
		last = took > last ? took : last;
		end = done > end ? done : end;
		ctl += nodes[i].control;
	}
	double model = chunk_bytes * nchunks;
	double alone = lat_ms + model / link;
	double seed_sent = nodes[0].sent / model;
	double data = model * n;
	/* What bound it: the seed's uplink busy all along, or the
	 * replicas' downlinks. */
	double seed_busy = end > 0 ? nodes[0].sent / (nodes[0].up * end) : 0;
	printf("%-7s %5u %8u %9.2f %9.2f %6.2f %8.2f %9.4f%% %s%s\n", label, n,
	       nchunks, last / 1e3, alone / 1e3, last / alone, seed_sent,
	       100.0 * ctl / data,
	       seed_busy > 0.9	     ? "seed uplink"
	       : last < 1.15 * alone ? "replica downlinks"
				     : "waits (policy)",
	       unfinished ? " UNFINISHED" : "");
	/* Where the time went: the seed's part (its uplink is a replica's
	 * downlink: sending 1.00 x takes at least one replica alone), and
	 * what came after its last chunk (in fleet lanes, a chunk's way
	 * down its binomial tree: up to ceil(log2 n) levels, each known to
	 * the next at its holdings question). */
	uint32_t levels = 0;
	while (fleet_lanes && ((uint64_t)1 << levels) < n)
		levels++;
	fprintf(stderr,
		"sim: why: the seed's last pull ended at %.2f s, %.2f x one "
		"replica alone (it sent %.2f x the model over an uplink as "
		"fast as a replica's downlink); the last replica was done "
		"%.2f s after it",
		seed_last_ms / 1e3, seed_last_ms / alone, seed_sent,
		(end - seed_last_ms) / 1e3);
	if (fleet_lanes)
		fprintf(stderr,
			" (a chunk's way down its tree: up to %u levels, "
			"each known at a holdings question every %.0f ms)",
			levels, poll_ms);
	fprintf(stderr, "\n");
	fprintf(stderr, "sim: %" PRIu64 " policy calls, %u flows\n",
		policy_calls, nflows);
	return unfinished ? 1 : 0;
}
