/* SPDX-License-Identifier: MIT */
#include "progress.h"

#include "util.h"

#include <stdio.h>
#include <unistd.h>

void sfs_progress_start(struct sfs_progress *p, const char *what,
			uint64_t total)
{
	p->what = what;
	p->total = total;
	p->done = 0;
	p->t0_ns = p->last_ns = sfs_now_ns();
	p->tty = isatty(STDERR_FILENO);
}

static void draw(struct sfs_progress *p, uint64_t now)
{
	double s = (double)(now - p->t0_ns) / 1e9;
	double rate = s > 0 ? (double)p->done / s : 0;
	double pct =
		p->total ? 100.0 * (double)p->done / (double)p->total : 100.0;
	char d[32], t[32], eta[32] = "";
	sfs_fmt_bytes(p->done, d, sizeof(d));
	sfs_fmt_bytes(p->total, t, sizeof(t));
	if (rate > 0 && p->done < p->total)
		snprintf(eta, sizeof(eta), "  ETA %.0fs",
			 (double)(p->total - p->done) / rate);
	if (p->tty) {
		char bar[31];
		int n = (int)(pct * 30 / 100);
		for (int i = 0; i < 30; i++)
			bar[i] = i < n ? '#' : '.';
		bar[30] = '\0';
		fprintf(stderr, "\r%s [%s] %3.0f%%  %s / %s  %.0f MB/s%s\033[K",
			p->what, bar, pct, d, t, rate / 1e6, eta);
	} else {
		fprintf(stderr, "%s: %s of %s (%.0f%%), %.0f MB/s%s\n", p->what,
			d, t, pct, rate / 1e6, eta);
	}
	fflush(stderr);
}

void sfs_progress_add(struct sfs_progress *p, uint64_t n)
{
	uint64_t now = sfs_now_ns();
	p->done += n;
	/* 10 redraws a second on a terminal, a line every 5 s in a log. */
	if (now - p->last_ns >= (p->tty ? 100000000ull : 5000000000ull)) {
		p->last_ns = now;
		draw(p, now);
	}
}

void sfs_progress_end(struct sfs_progress *p, int ok)
{
	uint64_t now = sfs_now_ns();
	double s = (double)(now - p->t0_ns) / 1e9;
	char d[32];
	if (p->tty) {
		draw(p, now);
		fputc('\n', stderr);
	}
	fprintf(stderr, "%s: %s %s in %.2f s (%.0f MB/s)\n", p->what,
		ok ? "done," : "FAILED after",
		sfs_fmt_bytes(p->done, d, sizeof(d)), s,
		s > 0 ? (double)p->done / s / 1e6 : 0.0);
}
