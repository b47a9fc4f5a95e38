/* SPDX-License-Identifier: MIT */
/*
 * mem.h - how much memory this process can still get: the machine's
 * MemAvailable and the room left under every memory limit of its cgroup
 * and their ancestors (cgroup v2 memory.max, v1 memory.limit_in_bytes).
 */
#ifndef SFS_MEM_H
#define SFS_MEM_H

#include <stddef.h>
#include <stdint.h>

struct sfs_mem_room {
	uint64_t available; /* the least of the two below */
	uint64_t machine;   /* MemAvailable; UINT64_MAX: unknown */
	uint64_t cgroup;    /* limit - usage of the tightest; UINT64_MAX:
				no limit */
	uint64_t cg_limit;  /* that limit */
	char cg_path[1024]; /* that cgroup, e.g. "/system.slice/x" */
	char cg_file[32];   /* "memory.max" or "memory.limit_in_bytes" */
};

/*
 * sfs_mem_room - fill @r.  @sysfs is where cgroups are mounted (NULL:
 * /sys/fs/cgroup), @proc where /proc is (NULL: /proc): tests point them
 * elsewhere.  Never fails: what cannot be read is unknown.
 */
void sfs_mem_room(struct sfs_mem_room *r, const char *proc, const char *sysfs);

/*
 * sfs_mem_default_cache - a mount's default --cache-size: 1/16 of @ram
 * bytes (0: unknown, then 256 MiB), at most half of what @r says is
 * available (the engine needs the rest), within [64 MiB, 4 GiB], in
 * whole MiB.
 */
uint64_t sfs_mem_default_cache(uint64_t ram, const struct sfs_mem_room *r);

#endif /* SFS_MEM_H */
