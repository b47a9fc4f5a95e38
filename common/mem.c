/* SPDX-License-Identifier: MIT */
#include "common/mem.h"
#include "common/util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NO_LIMIT (1ull << 62) /* v1 says "unlimited" as LLONG_MAX rounded */

/* A number (or "max") from a one-line file; 0 when it cannot be read. */
static int read_value(const char *path, uint64_t *v)
{
	char buf[64];
	FILE *f = fopen(path, "r");
	if (!f)
		return 0;
	int ok = fgets(buf, sizeof(buf), f) != NULL;
	fclose(f);
	if (!ok)
		return 0;
	if (!strncmp(buf, "max", 3)) {
		*v = UINT64_MAX;
		return 1;
	}
	char *end;
	unsigned long long n = strtoull(buf, &end, 10);
	if (end == buf)
		return 0;
	*v = n >= NO_LIMIT ? UINT64_MAX : (uint64_t)n;
	return 1;
}

static uint64_t mem_available(const char *proc)
{
	char path[128], line[256];
	unsigned long long kb;
	uint64_t v = UINT64_MAX;
	snprintf(path, sizeof(path), "%s/meminfo", proc);
	FILE *f = fopen(path, "r");
	if (!f)
		return v;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1)
			v = (uint64_t)kb * 1024;
	fclose(f);
	return v;
}

/* The tightest limit on @cg and its ancestors under @root. */
static void walk_up(struct sfs_mem_room *r, const char *root, const char *cg,
		    const char *limit_file, const char *usage_file)
{
	char prefix[1024], path[1400];
	snprintf(prefix, sizeof(prefix), "%s", cg);
	for (;;) {
		uint64_t limit, usage = 0;
		snprintf(path, sizeof(path), "%s%s/%s", root,
			 strcmp(prefix, "/") ? prefix : "", limit_file);
		if (read_value(path, &limit) && limit != UINT64_MAX) {
			snprintf(path, sizeof(path), "%s%s/%s", root,
				 strcmp(prefix, "/") ? prefix : "", usage_file);
			read_value(path, &usage);
			uint64_t room = limit > usage ? limit - usage : 0;
			if (room < r->cgroup) {
				r->cgroup = room;
				r->cg_limit = limit;
				snprintf(r->cg_path, sizeof(r->cg_path), "%s",
					 prefix);
				snprintf(r->cg_file, sizeof(r->cg_file), "%s",
					 limit_file);
			}
		}
		char *slash = strrchr(prefix, '/');
		if (!slash || !strcmp(prefix, "/"))
			break;
		if (slash == prefix)
			slash[1] = '\0'; /* "/a" -> "/" */
		else
			*slash = '\0';
	}
}

void sfs_mem_room(struct sfs_mem_room *r, const char *proc, const char *sysfs)
{
	char path[256], line[1200], v1[600], v2[600];
	proc = proc ? proc : "/proc";
	sysfs = sysfs ? sysfs : "/sys/fs/cgroup";
	memset(r, 0, sizeof(*r));
	r->machine = mem_available(proc);
	r->cgroup = UINT64_MAX;

	v1[0] = v2[0] = '\0';
	snprintf(path, sizeof(path), "%s/self/cgroup", proc);
	FILE *f = fopen(path, "r");
	while (f && fgets(line, sizeof(line), f)) {
		line[strcspn(line, "\n")] = '\0';
		char *c1 = strchr(line, ':'),
		     *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
		if (!c2)
			continue;
		*c2 = '\0';
		const char *ctrl = c1 + 1, *cg = c2 + 1;
		if (!strcmp(line, "0") && !*ctrl) {
			snprintf(v2, sizeof(v2), "%s", cg);
			continue;
		}
		/* "memory" among the controllers of a v1 hierarchy */
		char ctl[256];
		snprintf(ctl, sizeof(ctl), ",%s,", ctrl);
		if (strstr(ctl, ",memory,"))
			snprintf(v1, sizeof(v1), "%s", cg);
	}
	if (f)
		fclose(f);
	if (*v1) {
		snprintf(path, sizeof(path), "%s/memory", sysfs);
		walk_up(r, path, v1, "memory.limit_in_bytes",
			"memory.usage_in_bytes");
	}
	if (*v2)
		walk_up(r, sysfs, v2, "memory.max", "memory.current");
	r->available = r->machine < r->cgroup ? r->machine : r->cgroup;
}

uint64_t sfs_mem_default_cache(uint64_t ram, const struct sfs_mem_room *r)
{
	uint64_t v = ram ? ram / 16 : 256u << 20;
	v = SFS_MIN(v, r->available / 2);
	v = SFS_MAX(v, 64ull << 20);
	v = SFS_MIN(v, 4ull << 30);
	return v & ~((1ull << 20) - 1);
}
