/* SPDX-License-Identifier: MIT */
/*
 * signstate.h - the signed generations a replica took, remembered
 * across restarts (docs/security.md, "Signed generations remembered").
 *
 * A replica that checks signatures (--trust-key) keeps one record per
 * (model, signing key id, signer): the signer's run it took last (the
 * seed's signed instance), the highest generation of that run it took,
 * and when that one was signed.  A manifest is refused when it is older
 * than the record:
 *
 *   - the same run: a lower generation (generations count up within a
 *     run; a restarted seed counts from 1 again, in a new run);
 *   - another run of the same signer: signed more than SFS_SIGN_STEP_S
 *     before the record (one signer's clock, which may step back that
 *     much between its runs).
 *
 * signed_at is never compared across signers (their clocks differ):
 * another signer has its own record.  Taking a manifest moves the record
 * forward (a newer run replaces it).
 *
 * The records live in memory and in the file SFS_SIGNSTATE_FILE in a
 * directory (--cache-dir, else sfs_signstate_default_dir), written
 * whole to a temporary file, synced and renamed over the old one, mode
 * 0600, under an flock of the directory (mounts and pulls of one user
 * share it).  The file is untrusted input: at most SFS_SIGNSTATE_BYTES,
 * SFS_SIGNSTATE_MAX records, every field parsed strictly; one that does
 * not parse is refused at open in one line naming its line and field.
 *
 *   seedfs-signed-generations 1
 *   MODEL KEY SIGNER RUN GENERATION SIGNED_AT
 *
 * MODEL is the model name with every byte outside [A-Za-z0-9._~-]
 * written %XX (uppercase hex); KEY 16 lowercase hex digits; SIGNER as a
 * manifest's signer; RUN 16 lowercase hex digits, not all zero;
 * GENERATION and SIGNED_AT (ns since the epoch, > 0) decimal without
 * leading zeros; one space between fields, a newline after each line.
 *
 * Thread safety: every call on one state may run in any thread; the
 * state has its own lock.
 */
#ifndef SFS_SIGNSTATE_H
#define SFS_SIGNSTATE_H

#include <stddef.h>
#include <stdint.h>

#define SFS_SIGNSTATE_FILE "signed-generations"
#define SFS_SIGNSTATE_MAX 4096	       /* records; the oldest signed go */
#define SFS_SIGNSTATE_BYTES (4u << 20) /* of the file */
/* A signer's clock may step back this much between two of its runs. */
#define SFS_SIGN_STEP_S 60

struct sfs_manifest;
struct sfs_signstate;

/*
 * sfs_signstate_default_dir - where a replica keeps the file when it has
 * no --cache-dir, into @buf: $SEEDFS_STATE_DIR if set, else
 * /var/lib/seedfs for root, else $XDG_STATE_HOME/seedfs, else
 * ~/.local/state/seedfs.  0, or -ENOENT / -ENAMETOOLONG with one line
 * in @err.
 */
int sfs_signstate_default_dir(char *buf, size_t len, char *err, size_t errlen);

/*
 * sfs_signstate_open - the records in @dir (created 0700 with its
 * missing parents; it must be a directory of this user or root's that
 * neither group nor others can write, below parents only root or this
 * user can change, or sticky).  A missing file is no record.  *out
 * [new, sfs_signstate_free].  0, or -errno with one line in @err naming
 * the directory or the file (and the line and field that do not
 * parse).
 */
int sfs_signstate_open(const char *dir, struct sfs_signstate **out, char *err,
		       size_t errlen);

/*
 * sfs_signstate_parse - a state held in memory only (no file), from
 * the @len bytes at @text in the file's form; @name names it in
 * messages.  *out [new].  0, or -EINVAL (-E2BIG, -ENOMEM) with one line
 * in @err naming the line and the field.  Pure; for tests and fuzzing.
 */
int sfs_signstate_parse(const char *text, size_t len, const char *name,
			struct sfs_signstate **out, char *err, size_t errlen);

/* sfs_signstate_free - NULL is fine. */
void sfs_signstate_free(struct sfs_signstate *s);

/* The file [borrowed] ("" when in memory only), and the records held. */
const char *sfs_signstate_path(const struct sfs_signstate *s);
size_t sfs_signstate_count(struct sfs_signstate *s);

/*
 * sfs_signstate_take - may the verified manifest @m (signed, with
 * signer and signer_run) be taken?  0: yes, and the record moves
 * forward to it (in memory; sfs_signstate_save writes it); -ESTALE: it
 * is older than what was taken (one line in @why naming both
 * generations); -EINVAL: @m says no signer or run.  The file is read
 * again first when another process replaced it.
 */
int sfs_signstate_take(struct sfs_signstate *s, const struct sfs_manifest *m,
		       char *why, size_t whylen);

/*
 * sfs_signstate_save - write the records to the file when they changed
 * since the last save, merged with what another process wrote there
 * meanwhile (the newer of two records of one key stays).  0, or -errno
 * with one line in @err (the records stay in memory and are written at
 * the next save).  No-op for a state in memory only.
 */
int sfs_signstate_save(struct sfs_signstate *s, char *err, size_t errlen);

/*
 * sfs_signstate_text - the records in the file's form, into *out [new,
 * NUL-terminated] and *len.  0 or -ENOMEM.  For tests.
 */
int sfs_signstate_text(struct sfs_signstate *s, char **out, size_t *len);

#endif /* SFS_SIGNSTATE_H */
