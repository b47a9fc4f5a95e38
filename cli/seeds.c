/* SPDX-License-Identifier: MIT */
/* seeds.c - --seed HOST:PORT[,HOST:PORT...] for mount and pull. */
#include "cli/cli.h"

#include "common/util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int cli_seeds_add(struct cli_seeds *s, const char *arg, const char *who)
{
	char *dup = strdup(arg), *save = NULL;
	if (!dup)
		return -1;
	for (char *t = strtok_r(dup, ",", &save); t;
	     t = strtok_r(NULL, ",", &save)) {
		char h[256], p[16];
		if (sfs_parse_hostport(t, h, sizeof(h), p, sizeof(p)) || !*h ||
		    !*p) {
			fprintf(stderr, "%s: --seed '%s' is not HOST:PORT\n",
				who, t);
			free(dup);
			return -1;
		}
		if (s->n == sizeof(s->list) / sizeof(s->list[0])) {
			fprintf(stderr, "%s: at most %zu seeds\n", who,
				sizeof(s->list) / sizeof(s->list[0]));
			free(dup);
			return -1;
		}
		if (!(s->list[s->n] = strdup(t))) {
			free(dup);
			return -1;
		}
		s->n++;
	}
	free(dup);
	if (!s->text && !(s->text = strdup(arg)))
		return -1;
	return 0;
}

void cli_seeds_free(struct cli_seeds *s)
{
	for (size_t i = 0; i < s->n; i++)
		free(s->list[i]);
	free(s->text);
	memset(s, 0, sizeof(*s));
}
