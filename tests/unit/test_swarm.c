/* SPDX-License-Identifier: MIT */
/*
 * test_swarm.c - the swarm's policy on its own (cache/swarm.c), with
 * holders made up here as plain arrays (the simulator does the same at
 * fleet scale): lanes deal chunks in turn, a seed is kept off what a
 * member that can serve holds and waits for a member's lane while it
 * grows, a member that cannot serve keeps no seed off, a relay tree's
 * member takes a chunk from its parent at once and from others only
 * after its level's wait, and every "not yet" names when to look again.
 */
#include "check_run.h"

#include "cache/swarm.h"

#include <check.h>
#include <errno.h>
#include <stdint.h>
#include <string.h>

#define NH 8
#define NCH 64

/* Holder h: facts, and which chunks it holds or has coming. */
struct model {
	struct sfs_swarm_member m[NH];
	unsigned char has[NH][NCH], coming[NH][NCH];
	size_t n;
};

static int m_has(void *arg, uint32_t h, uint32_t obj, uint64_t idx, int coming)
{
	struct model *md = arg;
	ck_assert_uint_eq(obj, 0);
	ck_assert_uint_lt(idx, NCH);
	return coming ? md->coming[h][idx] : md->has[h][idx];
}

static int m_member(void *arg, uint32_t h, struct sfs_swarm_member *m)
{
	struct model *md = arg;
	if (h >= md->n)
		return -ENOENT;
	*m = md->m[h];
	return 0;
}

static const struct sfs_swarm_ops ops = {.has = m_has, .member = m_member};
static const uint64_t base[1] = {0};

/* Holder i on peer i; holder 0 a seed that holds all. */
static void model_init(struct model *md, size_t n)
{
	memset(md, 0, sizeof(*md));
	md->n = n;
	for (size_t i = 0; i < n; i++)
		md->m[i] = (struct sfs_swarm_member){.peer = (uint32_t)i,
						     .lane = SIZE_MAX,
						     .answers = 1,
						     .proven = 1};
	md->m[0].last_resort = 1;
	memset(md->has[0], 1, NCH);
}

static struct sfs_swarm swarm(struct model *md, const uint32_t *holders,
			      const struct sfs_cache_lane *lanes, size_t nlanes,
			      size_t me, uint64_t now)
{
	return (struct sfs_swarm){.ops = &ops,
				  .arg = md,
				  .holders = holders,
				  .nholders = md->n,
				  .base = base,
				  .nobjs = 1,
				  .lanes = lanes,
				  .nlanes = nlanes,
				  .lane_me = me,
				  .now = now};
}

static struct sfs_swarm_chunk chunk(uint64_t idx, uint64_t queued)
{
	return (struct sfs_swarm_chunk){
		.idx = idx, .avoid = SFS_CACHE_NONE, .queued_ms = queued};
}

START_TEST(tree_shape)
{
	/* Rank r takes from (r - 1) / 2, at depth floor(log2(r + 1)). */
	const size_t parent[8] = {0, 0, 0, 1, 1, 2, 2, 3};
	const unsigned int depth[8] = {0, 1, 1, 2, 2, 2, 2, 3};
	for (size_t r = 0; r < 8; r++) {
		ck_assert_uint_eq(sfs_swarm_parent(r), parent[r]);
		ck_assert_uint_eq(sfs_swarm_depth(r), depth[r]);
	}
	/* Ranks count from the chunk's owner, in key order, round. */
	ck_assert_uint_eq(sfs_swarm_rank(3, 3, 5), 0);
	ck_assert_uint_eq(sfs_swarm_rank(1, 3, 5), 3);
	ck_assert_uint_eq(sfs_swarm_rank(4, 3, 5), 1);
}
END_TEST

/* Three members (this replica, holders 1 and 2) and a seed (holder 0):
 * chunk g is lane g mod 3's.  The seed takes this replica's own lane at
 * once, and another's only once that member stopped growing (2 s). */
START_TEST(seed_takes_own_lane_waits_for_others)
{
	struct model md;
	model_init(&md, 3);
	uint32_t holders[3] = {0, 1, 2};
	struct sfs_cache_lane lanes[3] = {{.key = 1, .holder = 1},
					  {.key = 2, .holder = SFS_CACHE_NONE},
					  {.key = 3, .holder = 2}};
	md.m[1].lane = 0;
	md.m[2].lane = 2;
	md.m[1].grew_ms = md.m[2].grew_ms = 1000;
	struct sfs_swarm sw = swarm(&md, holders, lanes, 3, 1, 1000);
	int own = 0;
	for (uint64_t g = 0; g < 30; g++) {
		struct sfs_swarm_chunk q = chunk(g, 1000);
		int any;
		uint32_t lane = sfs_swarm_lane(&sw, &q, &any);
		ck_assert_int_eq(any, 1);
		ck_assert_uint_eq(lane, lanes[g % 3].holder);
		int t = sfs_swarm_takes(&sw, &q, &md.m[0], 0, 0);
		ck_assert_int_eq(t, g % 3 == 1);
		own += t;
	}
	ck_assert_int_eq(own, 10);
	/* 2 s later, nothing grew: the others' lanes are the seed's too. */
	sw.now = 3001;
	struct sfs_swarm_chunk q = chunk(0, 1000);
	ck_assert_int_eq(sfs_swarm_takes(&sw, &q, &md.m[0], 0, 0), 1);
	/* A member that grows is waited for. */
	md.m[1].grew_ms = 2900;
	ck_assert_int_eq(sfs_swarm_takes(&sw, &q, &md.m[0], 0, 0), 0);
	/* ... unless it does not answer. */
	md.m[1].answers = 0;
	ck_assert_int_eq(sfs_swarm_takes(&sw, &q, &md.m[0], 0, 0), 1);
}
END_TEST

/* No lanes: the seed is kept off what a member holds, but not by one
 * that cannot serve (distrusted, avoided, silent, or the one whose
 * bytes did not match), and a chunk served wrong goes to the seed. */
START_TEST(member_keeps_seed_off_only_when_it_serves)
{
	struct model md;
	model_init(&md, 2);
	uint32_t holders[2] = {0, 1};
	md.has[1][5] = 1;
	struct sfs_swarm sw = swarm(&md, holders, NULL, 0, SIZE_MAX, 100);
	struct sfs_swarm_chunk q = chunk(5, 0), r = chunk(6, 0);
	ck_assert_int_eq(sfs_swarm_takes(&sw, &q, &md.m[0], 0, 0), 0);
	ck_assert_int_eq(sfs_swarm_takes(&sw, &r, &md.m[0], 0, 0), 1);
	ck_assert_int_eq(sfs_swarm_takes(&sw, &q, &md.m[1], 1, 0), 1);
	md.m[1].distrusted = 1;
	ck_assert_int_eq(sfs_swarm_takes(&sw, &q, &md.m[0], 0, 0), 1);
	md.m[1].distrusted = 0;
	md.m[1].avoid_until_ms = 101;
	ck_assert_int_eq(sfs_swarm_takes(&sw, &q, &md.m[0], 0, 0), 1);
	md.m[1].avoid_until_ms = 100;
	ck_assert_int_eq(sfs_swarm_takes(&sw, &q, &md.m[0], 0, 0), 0);
	q.avoid = 1;
	ck_assert_int_eq(sfs_swarm_takes(&sw, &q, &md.m[0], 0, 0), 1);
	/* Served wrong by the member: the seed's, and the member's no
	 * more while the seed answers. */
	q.avoid = SFS_CACHE_NONE;
	q.mismatches = 1;
	ck_assert_int_eq(sfs_swarm_takes(&sw, &q, &md.m[0], 0, 0), 1);
	ck_assert_int_eq(sfs_swarm_takes(&sw, &q, &md.m[1], 1, 0), 0);
	md.m[0].answers = 0;
	ck_assert_int_eq(sfs_swarm_takes(&sw, &q, &md.m[1], 1, 0), 1);
}
END_TEST

/* A chunk coming at a member: the seed waits for it (2 s from when it
 * was first seen coming), and says when to look again. */
START_TEST(coming_waited_for_then_taken)
{
	struct model md;
	model_init(&md, 2);
	uint32_t holders[2] = {0, 1};
	md.coming[1][7] = 1;
	struct sfs_swarm sw = swarm(&md, holders, NULL, 0, SIZE_MAX, 500);
	struct sfs_swarm_chunk q = chunk(7, 0);
	ck_assert_int_eq(sfs_swarm_takes(&sw, &q, &md.m[0], 0, 0), 0);
	ck_assert_uint_eq(q.coming_ms, 500);
	ck_assert_uint_eq(sw.wake_ms, 2500);
	sw.now = 2499;
	ck_assert_int_eq(sfs_swarm_takes(&sw, &q, &md.m[0], 0, 0), 0);
	sw.now = 2500;
	ck_assert_int_eq(sfs_swarm_takes(&sw, &q, &md.m[0], 0, 0), 1);
	/* No longer coming: forgotten. */
	md.coming[1][7] = 0;
	ck_assert_int_eq(sfs_swarm_takes(&sw, &q, &md.m[0], 0, 0), 1);
	ck_assert_uint_eq(q.coming_ms, 0);
}
END_TEST

/* Seven members (holders 1..6 and this replica, lane 5): chunk 0 is lane
 * 0's (holder 1), this replica's rank 5, its parent rank 2 (lane 2,
 * holder 3).  From the parent at once; from another member only after
 * floor(log2(5)) = 2 levels of 250 ms from when a member first held it,
 * or once three members hold it. */
START_TEST(relay_tree_waits_for_parent)
{
	struct model md;
	model_init(&md, 7);
	uint32_t holders[7] = {0, 1, 2, 3, 4, 5, 6};
	struct sfs_cache_lane lanes[7];
	for (size_t i = 0; i < 7; i++) {
		uint32_t h = i < 5    ? (uint32_t)i + 1
			     : i == 5 ? SFS_CACHE_NONE
				      : 6;
		lanes[i] = (struct sfs_cache_lane){.key = i, .holder = h};
		if (h != SFS_CACHE_NONE)
			md.m[h].lane = i;
	}
	md.has[1][0] = md.has[3][0] = 1; /* the owner and the parent */
	struct sfs_swarm sw = swarm(&md, holders, lanes, 7, 5, 1000);
	struct sfs_swarm_chunk q = chunk(0, 900);
	ck_assert_int_eq(sfs_swarm_takes(&sw, &q, &md.m[3], 3, 0), 1);
	ck_assert_int_eq(sfs_swarm_takes(&sw, &q, &md.m[1], 1, 0), 0);
	ck_assert_uint_eq(q.held_ms, 1000);
	ck_assert_uint_eq(sw.wake_ms, 1500);
	sw.now = 1499;
	ck_assert_int_eq(sfs_swarm_takes(&sw, &q, &md.m[1], 1, 0), 0);
	sw.now = 1500;
	ck_assert_int_eq(sfs_swarm_takes(&sw, &q, &md.m[1], 1, 0), 1);
	/* Three members hold it: anyone's at once. */
	struct sfs_swarm_chunk r = chunk(0, 900);
	sw.now = 1000;
	md.has[2][0] = 1;
	ck_assert_int_eq(sfs_swarm_takes(&sw, &r, &md.m[1], 1, 0), 1);
	/* A parent that does not answer is not waited for. */
	md.has[2][0] = 0;
	md.m[3].answers = 0;
	ck_assert_int_eq(sfs_swarm_takes(&sw, &r, &md.m[1], 1, 0), 1);
}
END_TEST

/*
 * Fleet lanes (sw->fleet): 13 replicas, this one at lane 7, its members
 * at offsets -1, -2, -4, -8 (lanes 6, 5, 3, 12: holders 1 to 4), the
 * seed holder 0.  Chunk 7 is ours: the seed's at once.  Chunk 2's owner
 * is lane 2, our offset d = 5, the binomial parent at offset 5 - 4 = 1,
 * lane 3 (holder 3; a binary tree's would be offset 2, no member): from
 * it at once, from another member after popcount(5) = 2 levels; the
 * seed waits while the parent grows (and says till when), and takes it
 * once the parent holds the owner's next chunk (15) without it, after
 * the lane's idle time (2 s).
 */
START_TEST(fleet_binomial_tree)
{
	struct model md;
	model_init(&md, 5);
	uint32_t holders[5] = {0, 1, 2, 3, 4};
	struct sfs_cache_lane lanes[13];
	for (size_t i = 0; i < 13; i++)
		lanes[i] = (struct sfs_cache_lane){
			.key = i, .holder = SFS_CACHE_LANE_UNKNOWN};
	lanes[7].holder = SFS_CACHE_NONE;
	const size_t at[5] = {0, 6, 5, 3, 12};
	for (uint32_t h = 1; h < 5; h++) {
		lanes[at[h]].holder = h;
		md.m[h].lane = at[h];
		md.m[h].grew_ms = 1000;
	}
	struct sfs_swarm sw = swarm(&md, holders, lanes, 13, 7, 1000);
	sw.fleet = 1;
	sw.nchunks = NCH;
	/* Ours: the seed's, unless a member holds it. */
	struct sfs_swarm_chunk q = chunk(7, 1000);
	ck_assert_int_eq(sfs_swarm_takes(&sw, &q, &md.m[0], 0, 0), 1);
	md.has[1][7] = 1;
	ck_assert_int_eq(sfs_swarm_takes(&sw, &q, &md.m[0], 0, 0), 0);
	ck_assert_int_eq(sfs_swarm_takes(&sw, &q, &md.m[1], 1, 0), 1);
	/* Chunk 2: the seed waits for the parent, which grows, till its
	 * growth is 2 s old. */
	q = chunk(2, 1000);
	ck_assert_int_eq(sfs_swarm_takes(&sw, &q, &md.m[0], 0, 0), 0);
	ck_assert_uint_eq(sw.wake_ms, 3000);
	/* Held by the parent and another member: the parent's at once,
	 * the other's after 2 levels of 250 ms, the seed's not at all. */
	md.has[3][2] = md.has[4][2] = 1;
	sw.wake_ms = 0;
	ck_assert_int_eq(sfs_swarm_takes(&sw, &q, &md.m[3], 3, 0), 1);
	ck_assert_int_eq(sfs_swarm_takes(&sw, &q, &md.m[4], 4, 0), 0);
	ck_assert_uint_eq(sw.wake_ms, 1500);
	sw.now = 1500;
	ck_assert_int_eq(sfs_swarm_takes(&sw, &q, &md.m[4], 4, 0), 1);
	ck_assert_int_eq(sfs_swarm_takes(&sw, &q, &md.m[0], 0, 0), 0);
	/* Lost upstream: the parent holds chunk 15 (the owner's next) but
	 * not 2, nobody else has it: the seed's after 2 s. */
	md.has[3][2] = md.has[4][2] = 0;
	md.has[3][15] = 1;
	struct sfs_swarm_chunk r = chunk(2, 1000);
	sw.now = 1600;
	sw.wake_ms = 0;
	ck_assert_int_eq(sfs_swarm_takes(&sw, &r, &md.m[0], 0, 0), 0);
	ck_assert_uint_eq(sw.wake_ms, 3600);
	sw.now = 3600;
	ck_assert_int_eq(sfs_swarm_takes(&sw, &r, &md.m[0], 0, 0), 1);
	/* ... unless the parent now has it coming: waited for, from now,
	 * and "lost" forgotten. */
	md.coming[3][2] = 1;
	ck_assert_int_eq(sfs_swarm_takes(&sw, &r, &md.m[0], 0, 0), 0);
	ck_assert_uint_eq(r.lost_ms, 0);
	ck_assert_uint_eq(r.coming_ms, 3600);
	/* Served wrong by a member: the seed's at once. */
	r.mismatches = 1;
	ck_assert_int_eq(sfs_swarm_takes(&sw, &r, &md.m[0], 0, 0), 1);
	/* A parent that stopped growing without it: the seed's after 2 s. */
	md.coming[3][2] = 0;
	md.has[3][15] = 0;
	md.m[3].grew_ms = 0;
	struct sfs_swarm_chunk t = chunk(2, 1000);
	ck_assert_int_eq(sfs_swarm_takes(&sw, &t, &md.m[0], 0, 0), 0);
	sw.now = 5600;
	ck_assert_int_eq(sfs_swarm_takes(&sw, &t, &md.m[0], 0, 0), 1);
	/* A parent not connected yet: 2 s from the chunk's queueing. */
	lanes[3].holder = SFS_CACHE_LANE_UNKNOWN;
	struct sfs_swarm_chunk u = chunk(2, 5000);
	sw.wake_ms = 0;
	ck_assert_int_eq(sfs_swarm_takes(&sw, &u, &md.m[0], 0, 0), 0);
	ck_assert_uint_eq(sw.wake_ms, 7000);
	sw.now = 7000;
	ck_assert_int_eq(sfs_swarm_takes(&sw, &u, &md.m[0], 0, 0), 1);
	/* ... and a member's copy taken at once. */
	md.has[4][2] = 1;
	ck_assert_int_eq(sfs_swarm_takes(&sw, &u, &md.m[4], 4, 0), 1);
}
END_TEST

int main(void)
{
	Suite *s = suite_create("swarm");
	TCase *t = tcase_create("policy");
	tcase_add_test(t, tree_shape);
	tcase_add_test(t, seed_takes_own_lane_waits_for_others);
	tcase_add_test(t, member_keeps_seed_off_only_when_it_serves);
	tcase_add_test(t, coming_waited_for_then_taken);
	tcase_add_test(t, relay_tree_waits_for_parent);
	tcase_add_test(t, fleet_binomial_tree);
	suite_add_tcase(s, t);
	return sfs_check_run(s);
}
