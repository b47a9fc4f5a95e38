/* SPDX-License-Identifier: MIT */
/*
 * seeds.c - --seed [https://]HOST:PORT[,...] and the credentials a
 * replica command shows its seeds (mount, pull).
 */
#include "cli/cli.h"

#include "common/log.h"
#include "common/secmem.h"
#include "common/util.h"
#include "control/auth.h"
#include "control/control.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void cli_no_dumps(const char *who, const char *serves)
{
	int shm = 0;
	for (const char *p = serves; p && *p;) {
		size_t n = strcspn(p, ",");
		shm |= n == 3 && !strncmp(p, "shm", 3);
		p += n + (p[n] == ',');
	}
	if (shm && geteuid() != 0) {
		SFS_LOG(SFS_INFO, who,
			"stays dumpable: it serves shm, whose readers of uid "
			"%u copy with process_vm_readv (its secrets are kept "
			"out of core dumps all the same)",
			(unsigned int)geteuid());
		return;
	}
	int rc = sfs_secmem_no_dumps();
	if (rc)
		SFS_LOG(SFS_WARN, who, "cannot leave core dumps out: %s",
			strerror(-rc));
}

void cli_err(const char *who, const char *text)
{
	char esc[2048];
	fprintf(stderr, "%s: %s\n", who,
		sfs_escape(text, strlen(text), esc, sizeof(esc)));
}

int cli_seeds_add(struct cli_seeds *s, const char *arg, const char *who)
{
	char err[512];
	if (!s->n && !s->text)
		s->https = -1;
	if (sfs_control_parse_seeds(arg, "--seed", s->list,
				    SFS_ARRAY_SIZE(s->list), &s->n, &s->https,
				    err, sizeof(err))) {
		cli_err(who, err);
		return -1;
	}
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

const char cli_sec_help[] =
	"    --token-file FILE      the seeds' token (one line), sent as\n"
	"                           Authorization: Bearer; read again when\n"
	"                           a seed refuses it (default\n"
	"                           $SEEDFS_TOKEN_FILE, naming the file)\n"
	"    --tls-ca FILE          speak TLS to the seeds and verify them\n"
	"                           against this PEM CA (https:// seeds:\n"
	"                           the system's CAs)\n"
	"    --tls-pin PIN          speak TLS and hold the seeds to this\n"
	"                           public key: sha256//BASE64 as the seed\n"
	"                           prints it, or 64 hex digits; without\n"
	"                           --tls-ca the pin is the only check\n"
	"    --trust-key FILE       take only manifests signed by an\n"
	"                           Ed25519 key in FILE (PEM public keys,\n"
	"                           the seeds' --sign-key), each file's\n"
	"                           chunks checked with their SHA-256\n"
	"                           (seeds need --digest sha256); no lapsed\n"
	"                           signature, no generation older than one\n"
	"                           taken before (remembered in --cache-dir,\n"
	"                           else $SEEDFS_STATE_DIR, /var/lib/seedfs\n"
	"                           for root, $XDG_STATE_HOME/seedfs)\n";

int cli_cred(const struct cli_sec *sec, const struct cli_seeds *seeds,
	     const char *who, struct sfs_control_cred **out)
{
	struct sfs_control_cred_cfg cc = {
		.token_file = sfs_auth_file(sec->token_file),
		.tls_ca = sec->tls_ca,
		.tls_pin = sec->tls_pin,
		.https = seeds && seeds->n && seeds->https == 1,
		.trust_key = sec->trust_key};
	char err[512];

	if (seeds && seeds->n && seeds->https == 0 &&
	    (sec->tls_ca || sec->tls_pin)) {
		fprintf(stderr,
			"%s: --tls-ca and --tls-pin speak TLS; the seeds are "
			"given as http://\n",
			who);
		return -1;
	}
	if (sfs_control_cred_new(&cc, out, err, sizeof(err))) {
		cli_err(who, err);
		return -1;
	}
	return 0;
}
