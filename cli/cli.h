/* SPDX-License-Identifier: MIT */
/*
 * cli.h - the seedfs command's subcommands: each parses its options,
 * prints its --help, calls the layers below and returns the exit status.
 */
#ifndef SFS_CLI_H
#define SFS_CLI_H

int sfs_cli_seed(int argc, char **argv);     /* seed.c */
int sfs_cli_mount(int argc, char **argv);    /* mount.c */
int sfs_cli_pull(int argc, char **argv);     /* pull.c */
int sfs_cli_prefetch(int argc, char **argv); /* prefetch.c */
int sfs_cli_probe(int argc, char **argv);    /* probe.c */

#include <stddef.h>

/* Seeds given as "[https://]HOST:PORT[,...]" (one or more options). */
struct cli_seeds {
	size_t n;
	char *list[64];
	char *text; /* the first option's argument, for messages */
	int https;  /* -1: no scheme given; else every seed's */
};

/*
 * cli_seeds_add - split @arg into @s; one line on stderr (starting with
 * @who) for a seed that is not HOST:PORT, one too many, or schemes that
 * differ.  0 or -1.  cli_seeds_free - free what was added.  (seeds.c)
 */
int cli_seeds_add(struct cli_seeds *s, const char *arg, const char *who);
void cli_seeds_free(struct cli_seeds *s);

/* What a replica command shows the seeds: --token-file (else
 * $SEEDFS_TOKEN_FILE), --tls-ca, --tls-pin, and https:// seeds. */
struct cli_sec {
	const char *token_file, *tls_ca, *tls_pin;
	const char *trust_key; /* --trust-key */
};
struct sfs_control_cred;

/*
 * cli_cred - the credentials of @sec and @seeds into *out [new]; one
 * line on stderr starting with @who when the token file or the pin is
 * bad.  0 or -1.  (seeds.c)
 */
int cli_cred(const struct cli_sec *sec, const struct cli_seeds *seeds,
	     const char *who, struct sfs_control_cred **out);

/*
 * cli_err - "@who: @text" and a newline on stderr, @text escaped
 * (sfs_escape): an error line may carry a name or a message that came
 * from the network or from disk, and a newline in it must not print a
 * line of its own.  (seeds.c)
 */
void cli_err(const char *who, const char *text);

/*
 * cli_no_dumps - a daemon that holds secrets leaves core dumps and other
 * processes of its user out (common/secmem.h: PR_SET_DUMPABLE 0), unless
 * it serves shm (@serves: the protocols it serves, comma separated, or
 * NULL) as a user other than root: its readers of that user copy with
 * process_vm_readv, which the kernel refuses into an undumpable process.
 * That case stays dumpable and says so in one info line (@who: the
 * log's subsystem).  (seeds.c)
 */
void cli_no_dumps(const char *who, const char *serves);

/* The --help lines of those options (seeds.c). */
extern const char cli_sec_help[];

#endif /* SFS_CLI_H */
