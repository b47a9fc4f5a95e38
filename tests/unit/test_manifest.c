/* SPDX-License-Identifier: MIT */
/*
 * Unit tests: manifest round trip, one test per rejection rule, extent
 * lookup at every boundary.
 */
#include "control/sign.h"
#include "metadata/manifest.h"

#include "check_run.h"
#include "bound.h"

#include <check.h>
#include <errno.h>
#include <gnutls/abstract.h>
#include <gnutls/gnutls.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char err[512];
static const uint8_t addr[16] = {2, 0, 0x1f, 0x90, 127, 0, 0, 1};
static const char hdr[10] = "0123456789";
static const uint8_t rawkey[12] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 0xff};

/* A manifest using every feature: inline and region extents, split
 * files, an empty file, nested directories, tensors. */
static struct sfs_manifest *sample(void)
{
	struct sfs_manifest *m = sfs_manifest_new("tiny", 7);
	uint32_t r0, r1;
	size_t f;
	uint64_t shape[2] = {3, 5}, zero[1] = {0};

	ck_assert_ptr_nonnull(m);
	ck_assert_int_eq(
		sfs_manifest_add_endpoint(m, "tcp", "tcp;ofi_rxm",
					  "FI_OFI_RXM_BUFFER_SIZE=1024", addr,
					  sizeof(addr)),
		0);
	ck_assert_int_eq(
		sfs_manifest_add_endpoint(m, "rdma", "ibverbs", NULL, addr, 4),
		0);
	ck_assert_int_eq(sfs_manifest_add_region(m, 1000, &r0), 0);
	sfs_manifest_set_remote(m, r0, 0, 0x7f0000001000ull, 0x11);
	sfs_manifest_set_remote(m, r0, 1, 0x7f0000002000ull, 0x22);
	ck_assert_int_eq(sfs_manifest_add_region(m, 300, &r1), 0);
	sfs_manifest_set_remote(m, r1, 0, 0, UINT64_MAX - 1);
	/* A provider with raw keys (FI_MR_RAW) on the second endpoint. */
	ck_assert_int_eq(sfs_manifest_set_remote_raw(m, r1, 1, 0x1000, rawkey,
						     sizeof(rawkey)),
			 0);
	ck_assert_int_eq(sfs_manifest_add_dir(m, "sub"), 0);
	sfs_mmeta_set(&m->dir_meta[0], 1700000000123456789ll, 0755);
	ck_assert_int_eq(sfs_manifest_add_dir(m, "sub/deeper"), 0);
	sfs_mmeta_set(&m->root_meta, 1700000001000000000ll, 0750);
	ck_assert_int_eq(sfs_manifest_add_file(m, "config.json", &f), 0);
	ck_assert_int_eq(sfs_manifest_add_inline(m, f, "{}", 2), 0);
	sfs_mmeta_set(&m->files[f].meta, -5, 0644);
	ck_assert_int_eq(sfs_manifest_add_file(m, "model.safetensors", &f), 0);
	ck_assert_int_eq(sfs_manifest_add_inline(m, f, hdr, 10), 0);
	ck_assert_int_eq(sfs_manifest_add_remote(m, f, r0, 10, 990), 0);
	ck_assert_int_eq(
		sfs_manifest_add_tensor(m, "w", "F32", 2, shape, f, 10, 60), 0);
	sfs_identity_set(&m->id, "quant", "fp8", err, sizeof(err));
	sfs_identity_set(&m->id, "tp_size", "2", err, sizeof(err));
	sfs_identity_set(&m->id, "tp_rank", "1", err, sizeof(err));
	sfs_identity_set_params(&m->id, "{\"weight_block_size\":[128,128]}",
				err, sizeof(err));
	m->tensors[0].has_xxh3 = 1;
	m->tensors[0].xxh3 = 0x0123456789abcdefull;
	strcpy(m->tensors[0].layout, "checkpoint:block128");
	ck_assert_int_eq(
		sfs_manifest_add_tensor(m, "zero", "BF16", 1, zero, f, 70, 0),
		0);
	ck_assert_int_eq(sfs_manifest_add_file(m, "sub/empty", &f), 0);
	ck_assert_int_eq(sfs_manifest_add_file(m, "sub/deeper/big.bin", &f), 0);
	ck_assert_int_eq(sfs_manifest_add_remote(m, f, r1, 0, 100), 0);
	ck_assert_int_eq(sfs_manifest_add_inline(m, f, "x", 1), 0);
	ck_assert_int_eq(sfs_manifest_add_remote(m, f, r1, 100, 200), 0);
	/* Every file's digest; checksums of one, in 4 KiB chunks. */
	for (size_t i = 0; i < m->nfiles; i++) {
		m->files[i].has_xxh3 = 1;
		m->files[i].xxh3 = 0x1000 + i;
	}
	uint64_t sums[1] = {0xfeedfacecafebeefull};
	ck_assert_int_eq(sfs_manifest_set_checksums(m, 1, 12, sums, 1), 0);
	return m;
}

/* The content digest depends on paths, sizes and digests only: not on
 * how the bytes are laid out (extents, regions), nor on the order of
 * the files, nor on checksums. */
START_TEST(content_digest)
{
	struct sfs_manifest *m = sample(), *o = sample();
	uint64_t a, b;
	ck_assert_int_eq(sfs_manifest_content(m, &a), 0);
	/* Another layout of the same bytes: one region extent made two. */
	struct sfs_mfile *f = &o->files[1];
	f->ext[1].len = 400;
	ck_assert_int_eq(sfs_manifest_add_remote(o, 1, 0, 410, 590), 0);
	f->size = 1000;
	o->files[1].csum_shift = 0;
	ck_assert_int_eq(sfs_manifest_content(o, &b), 0);
	ck_assert_uint_eq(a, b);
	/* Another order of the files. */
	struct sfs_mfile t = o->files[0];
	o->files[0] = o->files[3];
	o->files[3] = t;
	ck_assert_int_eq(sfs_manifest_content(o, &b), 0);
	ck_assert_uint_eq(a, b);
	/* One digest different: another content. */
	o->files[2].xxh3 ^= 1;
	ck_assert_int_eq(sfs_manifest_content(o, &b), 0);
	ck_assert_uint_ne(a, b);
	o->files[2].xxh3 ^= 1;
	/* A size, a path. */
	o->files[3].size++;
	ck_assert_int_eq(sfs_manifest_content(o, &b), 0);
	ck_assert_uint_ne(a, b);
	o->files[3].size--;
	o->files[3].path[0] = 'C';
	ck_assert_int_eq(sfs_manifest_content(o, &b), 0);
	ck_assert_uint_ne(a, b);
	/* No digest: no content. */
	m->files[0].has_xxh3 = 0;
	ck_assert_int_eq(sfs_manifest_content(m, &a), -EINVAL);
	sfs_manifest_free(m);
	sfs_manifest_free(o);
}
END_TEST

/* An Ed25519 key made here: its private PEM (mode 0600) at @priv and
 * its public PEM at @pub. */
static void make_key(const char *priv, const char *pub)
{
	gnutls_privkey_t k;
	gnutls_pubkey_t p;
	gnutls_datum_t d;
	ck_assert_int_eq(gnutls_privkey_init(&k), 0);
	ck_assert_int_eq(
		gnutls_privkey_generate(k, GNUTLS_PK_EDDSA_ED25519, 256, 0), 0);
	gnutls_x509_privkey_t x;
	ck_assert_int_eq(gnutls_privkey_export_x509(k, &x), 0);
	ck_assert_int_eq(
		gnutls_x509_privkey_export2_pkcs8(x, GNUTLS_X509_FMT_PEM, NULL,
						  GNUTLS_PKCS_PLAIN, &d),
		0);
	FILE *f = fopen(priv, "w");
	ck_assert_ptr_nonnull(f);
	fchmod(fileno(f), 0600);
	fwrite(d.data, 1, d.size, f);
	fclose(f);
	gnutls_free(d.data);
	ck_assert_int_eq(gnutls_pubkey_init(&p), 0);
	ck_assert_int_eq(gnutls_pubkey_import_privkey(p, k, 0, 0), 0);
	ck_assert_int_eq(gnutls_pubkey_export2(p, GNUTLS_X509_FMT_PEM, &d), 0);
	f = fopen(pub, "w");
	ck_assert_ptr_nonnull(f);
	fwrite(d.data, 1, d.size, f);
	fclose(f);
	gnutls_free(d.data);
	gnutls_x509_privkey_deinit(x);
	gnutls_pubkey_deinit(p);
	gnutls_privkey_deinit(k);
}

/* Signed manifests: the signature survives the text (encode, decode) and
 * what a re-seeder changes (endpoints, remotes, run, epoch), and breaks
 * on any change of what a mount shows or checks bytes against; another
 * key is not trusted. */
START_TEST(signed_form)
{
	char dir[] = "/tmp/seedfs-sign.XXXXXX", priv[64], pub[64], priv2[64],
	     pub2[64];
	ck_assert_ptr_nonnull(mkdtemp(dir));
	snprintf(priv, sizeof(priv), "%s/k", dir);
	snprintf(pub, sizeof(pub), "%s/k.pub", dir);
	snprintf(priv2, sizeof(priv2), "%s/o", dir);
	snprintf(pub2, sizeof(pub2), "%s/o.pub", dir);
	make_key(priv, pub);
	make_key(priv2, pub2);
	struct sfs_sign_key *key;
	struct sfs_trust *trust, *other;
	ck_assert_msg(sfs_sign_key_load(priv, &key, err, sizeof(err)) == 0,
		      "%s", err);
	ck_assert_msg(sfs_trust_load(pub, &trust, err, sizeof(err)) == 0, "%s",
		      err);
	ck_assert_int_eq(sfs_trust_load(pub2, &other, err, sizeof(err)), 0);

	struct sfs_manifest *m = sample();
	uint8_t sha[32];
	memset(sha, 0xab, sizeof(sha));
	ck_assert_int_eq(sfs_manifest_set_sha256(m, 1, sha, 1), 0);
	uint8_t d[32], e[32];
	const int64_t at = 1764547200123456789ll;
	ck_assert_int_eq(sfs_sign_manifest(key, m, "bad host", 1, at, 3600),
			 -EINVAL);
	ck_assert_int_eq(
		sfs_sign_manifest(key, m, "seed-7.example", 0, at, 3600),
		-EINVAL);
	ck_assert_int_eq(sfs_sign_manifest(key, m, "seed-7.example",
					   0xfeedf00d12345678ull, at, 3600),
			 0);
	ck_assert_int_eq(m->valid_until, at + 3600000000000ll);
	ck_assert_int_eq(sfs_manifest_signed_digest(m, d), 0);
	char *json;
	size_t len;
	ck_assert_int_eq(sfs_manifest_encode(m, &json, &len), 0);
	struct sfs_manifest *r;
	ck_assert_msg(sfs_manifest_decode(json, len, &r, err, sizeof(err)) == 0,
		      "%s", err);
	free(json);
	ck_assert(r->has_sig);
	ck_assert_int_eq(r->signed_at, at);
	ck_assert_int_eq(r->valid_until, at + 3600000000000ll);
	ck_assert_str_eq(r->signer, "seed-7.example");
	ck_assert_uint_eq(r->signer_run, 0xfeedf00d12345678ull);
	ck_assert_int_eq(memcmp(r->files[1].sha256, sha, 32), 0);
	ck_assert_int_eq(sfs_manifest_signed_digest(r, e), 0);
	ck_assert_int_eq(memcmp(d, e, 32), 0);
	ck_assert_int_eq(sfs_trust_verify(trust, r->sig_key, e, 32, r->sig), 0);
	ck_assert_int_eq(sfs_trust_verify(other, r->sig_key, e, 32, r->sig),
			 -ENOKEY);
	/* What a re-seeder changes: not signed. */
	r->instance ^= 1;
	r->key_epoch = 9;
	r->holdings = 1;
	r->grace_seconds = 5;
	r->eps[0].addr[3] ^= 1;
	r->regions[0].rem[0].key ^= 1;
	ck_assert_int_eq(sfs_manifest_signed_digest(r, e), 0);
	ck_assert_int_eq(memcmp(d, e, 32), 0);
	/* What a mount shows or checks: signed, each of them. */
	struct {
		void *p;
		size_t off;
	} bits[] = {
		{&r->files[0].meta.mode, 0},
		{r->files[1].sha256, 31},
		{r->files[1].ext[0].data, 3},
		{&r->files[1].sums[0], 0},
		{&r->generation, 0},
		{r->model, 0},
		{&r->tensors[0].off, 0},
		{&r->files[1].size, 0},
		{&r->signed_at, 0},
		{&r->valid_until, 0},
		{r->signer, 0},
		{&r->signer_run, 0},
		{&r->id.tp_rank, 0},
		{r->id.quant, 1},
	};
	for (size_t i = 0; i < sizeof(bits) / sizeof(bits[0]); i++) {
		uint8_t *b = (uint8_t *)bits[i].p + bits[i].off;
		*b ^= 1;
		ck_assert_int_eq(sfs_manifest_signed_digest(r, e), 0);
		ck_assert_msg(memcmp(d, e, 32) != 0, "field %zu is not signed",
			      i);
		ck_assert_int_eq(
			sfs_trust_verify(trust, r->sig_key, e, 32, r->sig),
			-EBADMSG);
		*b ^= 1;
	}
	/* A signature that does not parse is refused, naming the field. */
	ck_assert_int_eq(sfs_manifest_encode(m, &json, &len), 0);
	char *v = strstr(json, "\"value\": \"");
	ck_assert_ptr_nonnull(v);
	v[10] = '!';
	sfs_manifest_free(r);
	ck_assert_int_eq(sfs_manifest_decode(json, len, &r, err, sizeof(err)),
			 -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "signature.value"));
	free(json);
	/* A key file others may read is refused. */
	chmod(priv, 0644);
	struct sfs_sign_key *k2 = NULL;
	ck_assert_int_ne(sfs_sign_key_load(priv, &k2, err, sizeof(err)), 0);
	ck_assert_ptr_nonnull(strstr(err, priv));
	sfs_manifest_free(m);
	sfs_sign_key_free(key);
	sfs_trust_free(trust);
	sfs_trust_free(other);
	unlink(priv);
	unlink(pub);
	unlink(priv2);
	unlink(pub2);
	rmdir(dir);
}
END_TEST

/* A signature lapses: valid_until, with SFS_SIGN_SKEW_S of clock skew
 * either way, and none without valid_until, signer or run. */
START_TEST(signature_lapses)
{
	const int64_t s = 1000000000, at = 1764547200ll * s, day = 86400 * s,
		      skew = SFS_SIGN_SKEW_S * s;
	struct sfs_manifest m = {.has_sig = 1,
				 .signed_at = at,
				 .valid_until = at + day,
				 .signer = "seed-7",
				 .signer_run = 0x1234};
	ck_assert_int_eq(sfs_sign_current(&m, at + s, err, sizeof(err)), 0);
	ck_assert_int_eq(sfs_sign_current(&m, at + day, err, sizeof(err)), 0);
	/* Lapsed, within the skew: taken; past it: refused, saying how
	 * long ago, until when and by whom. */
	ck_assert_int_eq(
		sfs_sign_current(&m, at + day + skew, err, sizeof(err)), 0);
	ck_assert_int_eq(
		sfs_sign_current(&m, at + day + skew + s, err, sizeof(err)),
		-EKEYEXPIRED);
	ck_assert_str_eq(err, "manifest signature expired 301 s ago (valid "
			      "until 2025-12-02T00:00:00Z, signed by seed-7; "
			      "clocks may differ by 300 s): an old manifest "
			      "played back, or a seed that no longer signs "
			      "again");
	ck_assert_int_eq(sfs_sign_current(&m, at + 2 * day, err, sizeof(err)),
			 -EKEYEXPIRED);
	ck_assert_ptr_nonnull(strstr(err, "expired 86400 s ago"));
	/* Made in the future: within the skew taken, past it refused. */
	ck_assert_int_eq(sfs_sign_current(&m, at - skew, err, sizeof(err)), 0);
	ck_assert_int_eq(sfs_sign_current(&m, at - skew - s, err, sizeof(err)),
			 -ERANGE);
	ck_assert_ptr_nonnull(strstr(err, "signed 301 s in the future"));
	/* A field missing: a seed older than this replica. */
	struct sfs_manifest n = m;
	n.valid_until = 0;
	ck_assert_int_eq(sfs_sign_current(&n, at + s, err, sizeof(err)),
			 -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "without valid_until"));
	n = m;
	n.signer[0] = '\0';
	ck_assert_int_eq(sfs_sign_current(&n, at + s, err, sizeof(err)),
			 -EINVAL);
	n = m;
	n.signer_run = 0;
	ck_assert_int_eq(sfs_sign_current(&n, at + s, err, sizeof(err)),
			 -EINVAL);
}
END_TEST

/* Entries left out for their names: counted, the first four kept
 * (raw, cut to 200 bytes), through encode and decode. */
START_TEST(skipped_round_trip)
{
	struct sfs_manifest *m = sample(), *d;
	char *a, long_name[300];
	size_t al;

	memset(long_name, 'x', sizeof(long_name) - 1);
	long_name[sizeof(long_name) - 1] = '\0';
	sfs_manifest_add_skipped(m, "a\nb.txt");
	sfs_manifest_add_skipped(m, long_name);
	for (int i = 0; i < 5; i++)
		sfs_manifest_add_skipped(m, "c\td.txt");
	ck_assert_int_eq(sfs_manifest_encode(m, &a, &al), 0);
	ck_assert_int_eq(sfs_manifest_decode(a, al, &d, err, sizeof(err)), 0);
	ck_assert_uint_eq(d->nskipped, 7);
	ck_assert_uint_eq(d->nskipped_shown, 4);
	ck_assert_str_eq(d->skipped[0], "a\nb.txt");
	ck_assert_uint_eq(strlen(d->skipped[1]), 200);
	ck_assert_str_eq(d->skipped[3], "c\td.txt");
	free(a);
	sfs_manifest_free(d);
	sfs_manifest_free(m);
}
END_TEST

START_TEST(round_trip)
{
	struct sfs_manifest *m = sample(), *d;
	char *a, *b;
	size_t al, bl;

	ck_assert_int_eq(sfs_manifest_validate(m, err, sizeof(err)), 0);
	ck_assert_int_eq(sfs_manifest_encode(m, &a, &al), 0);
	ck_assert_int_eq(sfs_manifest_decode(a, al, &d, err, sizeof(err)), 0);
	ck_assert_str_eq(d->model, "tiny");
	ck_assert_uint_eq(d->generation, 7);
	ck_assert_uint_eq(d->neps, 2);
	ck_assert_str_eq(d->eps[0].protocol, "tcp");
	ck_assert_str_eq(d->eps[0].provider, "tcp;ofi_rxm");
	ck_assert_str_eq(d->eps[0].compat, "FI_OFI_RXM_BUFFER_SIZE=1024");
	ck_assert_str_eq(d->eps[1].compat, ""); /* none: not published */
	ck_assert_ptr_null(strstr(a, "\"compat\": \"\""));
	ck_assert_uint_eq(d->eps[0].addr_len, sizeof(addr));
	ck_assert_mem_eq(d->eps[0].addr, addr, sizeof(addr));
	ck_assert_str_eq(d->eps[1].protocol, "rdma");
	ck_assert_uint_eq(d->eps[1].addr_len, 4);
	ck_assert_int_eq(sfs_manifest_endpoint(d, "rdma"), 1);
	ck_assert_int_eq(sfs_manifest_endpoint(d, "shm"), -1);
	char served[64];
	ck_assert_str_eq(sfs_manifest_protocols(d, served, sizeof(served)),
			 "tcp, rdma");
	ck_assert_uint_eq(d->nregions, 2);
	ck_assert_uint_eq(d->regions[0].rem[0].raddr, 0x7f0000001000ull);
	ck_assert_uint_eq(d->regions[0].rem[1].key, 0x22);
	ck_assert_uint_eq(d->regions[1].rem[0].key, UINT64_MAX - 1);
	ck_assert_uint_eq(d->regions[1].rem[0].raw_len, 0);
	ck_assert_uint_eq(d->regions[1].rem[1].raddr, 0x1000);
	ck_assert_uint_eq(d->regions[1].rem[1].raw_len, sizeof(rawkey));
	ck_assert_mem_eq(d->regions[1].rem[1].raw, rawkey, sizeof(rawkey));
	ck_assert_uint_eq(d->ndirs, 2);
	ck_assert_uint_eq(d->nfiles, 4);
	ck_assert_str_eq(d->files[1].path, "model.safetensors");
	ck_assert_uint_eq(d->files[1].size, 1000);
	ck_assert_uint_eq(d->files[1].next, 2);
	ck_assert_int_eq(d->files[1].ext[0].kind, SFS_EXT_INLINE);
	ck_assert_mem_eq(d->files[1].ext[0].data, hdr, 10);
	ck_assert_int_eq(d->files[1].ext[1].kind, SFS_EXT_REGION);
	ck_assert_uint_eq(d->files[1].ext[1].roff, 10);
	ck_assert_uint_eq(d->files[2].size, 0);
	ck_assert_uint_eq(d->files[3].size, 301);
	ck_assert_uint_eq(d->ntensors, 2);
	ck_assert_uint_eq(d->tensors[0].file, 1);
	ck_assert_uint_eq(d->tensors[0].shape[1], 5);
	ck_assert_str_eq(d->id.quant, "fp8");
	ck_assert_uint_eq(d->id.tp_rank, 1);
	ck_assert_str_eq(d->id.quant_params,
			 "{\"weight_block_size\":[128,128]}");
	ck_assert_uint_eq(strlen(d->id_short), 12);
	ck_assert_int_eq(d->tensors[0].has_xxh3, 1);
	ck_assert_uint_eq(d->tensors[0].xxh3, 0x0123456789abcdefull);
	ck_assert_str_eq(d->tensors[0].layout, "checkpoint:block128");
	ck_assert_int_eq(d->tensors[1].has_xxh3, 0);
	ck_assert_str_eq(d->tensors[1].layout, "");
	/* Version 4: digests, file checksums, the content digest. */
	ck_assert_uint_eq(d->version, 4);
	ck_assert_uint_eq(d->files[3].xxh3, 0x1003);
	ck_assert_uint_eq(d->files[1].csum_shift, 12);
	ck_assert_uint_eq(d->files[1].sums[0], 0xfeedfacecafebeefull);
	ck_assert_uint_eq(d->files[0].csum_shift, 0);
	uint64_t content;
	ck_assert_int_eq(sfs_manifest_content(m, &content), 0);
	ck_assert_uint_eq(d->content, content);
	/* Times and modes of files and directories. */
	ck_assert_int_eq(d->dir_meta[0].has, 1);
	ck_assert_int_eq(d->dir_meta[0].mtime_ns, 1700000000123456789ll);
	ck_assert_uint_eq(d->dir_meta[0].mode, 0755);
	ck_assert_int_eq(d->dir_meta[1].has, 0);
	ck_assert_int_eq(d->root_meta.mtime_ns, 1700000001000000000ll);
	ck_assert_uint_eq(d->root_meta.mode, 0750);
	ck_assert_int_eq(d->files[0].meta.mtime_ns, -5);
	ck_assert_uint_eq(d->files[0].meta.mode, 0644);
	ck_assert_int_eq(d->files[1].meta.has, 0);
	ck_assert_int_eq(sfs_manifest_encode(d, &b, &bl), 0);
	ck_assert_str_eq(a, b);
	free(a);
	free(b);
	sfs_manifest_free(m);
	sfs_manifest_free(d);
}
END_TEST

/* Encode the sample, let @mutate damage the JSON, expect a rejection
 * whose message contains @needle. */
static void expect_reject(void (*mutate)(json_t *), const char *needle)
{
	struct sfs_manifest *m = sample(), *d = NULL;
	char *text, *bad;
	size_t len;

	ck_assert_int_eq(sfs_manifest_encode(m, &text, &len), 0);
	json_t *root = json_loads(text, 0, NULL);
	ck_assert_ptr_nonnull(root);
	mutate(root);
	bad = json_dumps(root, 0);
	err[0] = '\0';
	ck_assert_int_eq(
		sfs_manifest_decode(bad, strlen(bad), &d, err, sizeof(err)),
		-EINVAL);
	ck_assert_ptr_null(d);
	ck_assert_msg(strstr(err, needle), "error '%s' lacks '%s'", err,
		      needle);
	json_decref(root);
	free(text);
	free(bad);
	sfs_manifest_free(m);
}

#define AT(r, key, i) json_array_get(json_object_get((r), (key)), (i))
#define SET(o, k, v) json_object_set_new((o), (k), (v))

#define REJECT(name, needle, body)                                             \
	static void mut_##name(json_t *r)                                      \
	{                                                                      \
		body;                                                          \
	}                                                                      \
	START_TEST(name)                                                       \
	{                                                                      \
		expect_reject(mut_##name, needle);                             \
	}                                                                      \
	END_TEST

REJECT(valid_until_zero, "valid_until: not a positive integer",
       SET(r, "valid_until", json_integer(0)))
REJECT(valid_until_string, "valid_until: not a positive integer",
       SET(r, "valid_until", json_string("1")))
REJECT(valid_until_before, "valid_until: 5 is not after signed_at 9",
       (SET(r, "signed_at", json_integer(9)),
	SET(r, "valid_until", json_integer(5))))
REJECT(signer_blank, "signer: not 1 to 64 of",
       SET(r, "signer", json_string("a b")))
REJECT(signer_empty, "signer: not 1 to 64 of",
       SET(r, "signer", json_string("")))
REJECT(signer_long, "signer: not 1 to 64 of",
       SET(r, "signer",
	   json_string("a1234567890123456789012345678901234567890123456789"
		       "012345678901234")))
REJECT(signer_newline, "signer: not 1 to 64 of",
       SET(r, "signer", json_string("seed\nready")))
REJECT(signer_run_zero, "signer_run: not a non-zero 64-bit hex string",
       SET(r, "signer_run", json_string("0x0")))
REJECT(signer_run_number, "signer_run: not a non-zero 64-bit hex string",
       SET(r, "signer_run", json_integer(5)))
REJECT(skipped_not_object, "skipped.count: not an integer",
       SET(r, "skipped", json_integer(2)))
REJECT(skipped_count_zero, "skipped.count: not an integer",
       SET(r, "skipped", json_pack("{s:i,s:[]}", "count", 0, "paths")))
REJECT(skipped_more_paths_than_count,
       "skipped.paths: not an array of at most 4 and at most skipped.count",
       SET(r, "skipped",
	   json_pack("{s:i,s:[s,s]}", "count", 1, "paths", "a", "b")))
REJECT(skipped_too_many_paths, "skipped.paths: not an array of at most 4",
       SET(r, "skipped",
	   json_pack("{s:i,s:[s,s,s,s,s]}", "count", 9, "paths", "a", "b", "c",
		     "d", "e")))
REJECT(skipped_path_long, "skipped.paths[1]: not a string of at most 200",
       SET(r, "skipped",
	   json_pack("{s:i,s:[s,s]}", "count", 2, "paths", "a",
		     "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
		     "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
		     "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"
		     "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxy")))
REJECT(version_missing, "seedfs_manifest",
       json_object_del(r, "seedfs_manifest"))
REJECT(version_unknown, "version 5, this build reads 4 (the seed is newer",
       SET(r, "seedfs_manifest", json_integer(5)))
REJECT(version_old, "version 3, this build reads 4 (the seed is older",
       SET(r, "seedfs_manifest", json_integer(3)))
REJECT(content_missing, "content: missing", json_object_del(r, "content"))
REJECT(content_wrong, "content: 0x0000000000000001 published",
       SET(r, "content", json_string("0x1")))
REJECT(file_digest_missing, "files[2].xxh3: missing",
       json_object_del(AT(r, "files", 2), "xxh3"))
REJECT(file_digest_changed,
       "content:", SET(AT(r, "files", 2), "xxh3", json_string("0x77")))
REJECT(checksum_algorithm, "files[1].checksum.algorithm",
       SET(json_object_get(AT(r, "files", 1), "checksum"), "algorithm",
	   json_string("md5")))
REJECT(checksum_chunk_size, "files[1].checksum.chunk_size",
       SET(json_object_get(AT(r, "files", 1), "checksum"), "chunk_size",
	   json_integer(5000)))
REJECT(checksum_count, "files[1].checksum.values: not 1 hex",
       SET(json_object_get(AT(r, "files", 1), "checksum"), "values",
	   json_string("00000000000000010000000000000002")))
REJECT(checksum_upper, "files[1].checksum.values: not lowercase",
       SET(json_object_get(AT(r, "files", 1), "checksum"), "values",
	   json_string("FEEDFACECAFEBEEF")))
REJECT(mode_too_big, "files[0].mode",
       SET(AT(r, "files", 0), "mode", json_integer(010000)))
REJECT(mode_negative, "files[0].mode",
       SET(AT(r, "files", 0), "mode", json_integer(-1)))
REJECT(mtime_not_int, "files[0].mtime_ns",
       SET(AT(r, "files", 0), "mtime_ns", json_string("yesterday")))
REJECT(mtime_without_mode, "dirs[1].mode",
       SET(AT(r, "dirs", 1), "mtime_ns", json_integer(1)))
REJECT(root_mode_bad, "manifest.mode", SET(r, "mode", json_real(1.5)))
REJECT(dir_v3_string, "dirs[0].path: not a string",
       json_array_set_new(json_object_get(r, "dirs"), 0, json_string("sub")))
REJECT(model_missing, "model:", json_object_del(r, "model"))
REJECT(model_slash, "model:", SET(r, "model", json_string("a/b")))
REJECT(model_dotdot, "model:", SET(r, "model", json_string("..")))
REJECT(model_empty, "model:", SET(r, "model", json_string("")))
REJECT(generation_negative, "generation",
       SET(r, "generation", json_integer(-1)))
REJECT(endpoints_missing, "endpoints", json_object_del(r, "endpoints"))
REJECT(endpoints_empty, "endpoints", SET(r, "endpoints", json_array()))
REJECT(endpoints_too_many, "endpoints", {
	json_t *e = json_object_get(r, "endpoints");
	for (int i = 0; i < 7; i++)
		json_array_append(e, json_array_get(e, 0));
})
REJECT(protocol_empty, "endpoints[0].protocol",
       SET(AT(r, "endpoints", 0), "protocol", json_string("")))
REJECT(protocol_twice, "protocol tcp listed twice",
       SET(AT(r, "endpoints", 1), "protocol", json_string("tcp")))
REJECT(address_not_hex, "endpoints[1].address",
       SET(AT(r, "endpoints", 1), "address", json_string("zz")))
REJECT(compat_number, "endpoints[0].compat",
       SET(AT(r, "endpoints", 0), "compat", json_integer(1024)))
REJECT(compat_control_char, "endpoints[0].compat",
       SET(AT(r, "endpoints", 0), "compat", json_string("FI_X=1\nFI_Y=2")))
REJECT(compat_too_long, "endpoints[1].compat",
       SET(AT(r, "endpoints", 1), "compat",
	   json_string(
		   "FI_OFI_RXM_BUFFER_SIZE=1024 FI_OFI_RXM_BUFFER_SIZE=1024 "
		   "FI_X=12345")))
REJECT(regions_not_array, "regions", SET(r, "regions", json_object()))
REJECT(region_id_mismatch, "regions[1].id",
       SET(AT(r, "regions", 1), "id", json_integer(0)))
REJECT(region_length_zero, "regions[0].length",
       SET(AT(r, "regions", 0), "length", json_integer(0)))
REJECT(region_remote_count, "regions[1].remote",
       json_array_remove(json_object_get(AT(r, "regions", 1), "remote"), 1))
REJECT(region_address_number, "regions[0].remote[1].address",
       SET(AT(AT(r, "regions", 0), "remote", 1), "address", json_integer(4096)))
REJECT(region_key_garbage, "regions[0].remote[0].key",
       SET(AT(AT(r, "regions", 0), "remote", 0), "key", json_string("0xfoo")))
REJECT(raw_key_not_hex, "regions[1].remote[1].raw_key",
       SET(AT(AT(r, "regions", 1), "remote", 1), "raw_key", json_string("zz")))
REJECT(raw_key_too_long, "regions[1].remote[1].raw_key",
       SET(AT(AT(r, "regions", 1), "remote", 1), "raw_key",
	   json_string("00112233445566778899aabbccddeeff00112233445566778899"
		       "aabbccddeeff00112233445566778899aabbccddeeff0011223344"
		       "5566778899aabbccddeeff00")))
REJECT(region_wraps, "regions[0].remote[0]",
       SET(AT(AT(r, "regions", 0), "remote", 0), "address",
	   json_string("0xfffffffffffffff0")))
REJECT(dirs_missing, "dirs", json_object_del(r, "dirs"))
REJECT(dir_absolute, "dirs[0]",
       json_array_set_new(json_object_get(r, "dirs"), 0, json_string("/x")))
REJECT(dir_dotdot, "dirs[0]",
       json_array_set_new(json_object_get(r, "dirs"), 0, json_string("../x")))
REJECT(dir_empty_component, "dirs[1]",
       json_array_set_new(json_object_get(r, "dirs"), 1, json_string("sub//x")))
REJECT(dir_duplicate, "duplicate",
       json_array_append_new(json_object_get(r, "dirs"),
			     json_pack("{s:s}", "path", "sub")))
REJECT(dir_parent_missing, "parent",
       json_array_remove(json_object_get(r, "dirs"), 0))
REJECT(file_reserved_name, "'.seedfs' is reserved",
       SET(AT(r, "files", 0), "path", json_string(".seedfs/x")))
REJECT(file_dotdot, "files[0].path",
       SET(AT(r, "files", 0), "path", json_string("sub/../../etc/passwd")))
REJECT(file_duplicate, "duplicate",
       SET(AT(r, "files", 2), "path", json_string("config.json")))
REJECT(file_is_dir, "duplicate",
       SET(AT(r, "files", 2), "path", json_string("sub/deeper")))
REJECT(file_parent_missing, "parent directory",
       SET(AT(r, "files", 2), "path", json_string("nodir/empty")))
REJECT(file_size_mismatch, "files[1].size",
       SET(AT(r, "files", 1), "size", json_integer(999)))
REJECT(file_size_over_cap, "files[1].size",
       SET(AT(r, "files", 1), "size", json_integer(1ll << 51)))
REJECT(extents_missing, "files[0].extents",
       json_object_del(AT(r, "files", 0), "extents"))
REJECT(extent_neither, "files[0].extents[0]",
       json_array_set_new(json_object_get(AT(r, "files", 0), "extents"), 0,
			  json_object()))
REJECT(extent_bad_base64, "inline",
       SET(json_array_get(json_object_get(AT(r, "files", 0), "extents"), 0),
	   "inline", json_string("e30")))
REJECT(extent_noncanonical_base64, "inline",
       SET(json_array_get(json_object_get(AT(r, "files", 0), "extents"), 0),
	   "inline", json_string("e31=")))
REJECT(extent_region_unknown, "is not a region",
       SET(json_array_get(json_object_get(AT(r, "files", 1), "extents"), 1),
	   "region", json_integer(5)))
REJECT(extent_past_region, "run past region",
       SET(json_array_get(json_object_get(AT(r, "files", 1), "extents"), 1),
	   "offset", json_integer(11)))
REJECT(extent_length_zero, "length",
       SET(json_array_get(json_object_get(AT(r, "files", 1), "extents"), 1),
	   "length", json_integer(0)))
REJECT(tensor_file_unknown, "tensors[0].file",
       SET(AT(r, "tensors", 0), "file", json_string("nope")))
REJECT(tensor_dtype_unknown, "tensors[0].dtype",
       SET(AT(r, "tensors", 0), "dtype", json_string("F7")))
REJECT(tensor_shape_mismatch, "tensors[0]",
       SET(AT(r, "tensors", 0), "length", json_integer(64)))
REJECT(tensor_past_file, "run past file",
       SET(AT(r, "tensors", 1), "offset", json_integer(1001)))
REJECT(identity_id_wrong, "identity_id",
       SET(r, "identity_id", json_string("000000000000")))
REJECT(identity_id_missing, "identity_id", json_object_del(r, "identity_id"))
REJECT(identity_model_differs, "identity.model",
       SET(json_object_get(r, "identity"), "model", json_string("other")))
REJECT(identity_generation_differs, "identity.generation",
       SET(json_object_get(r, "identity"), "generation", json_integer(8)))
REJECT(identity_rank_too_big, "identity.tp_rank",
       SET(json_object_get(r, "identity"), "tp_rank", json_integer(2)))
REJECT(identity_unknown_key, "identity.colour",
       SET(json_object_get(r, "identity"), "colour", json_string("red")))
REJECT(tensor_ggml_partial_block, "tensors[0] 'w': shape x Q8_0",
       SET(AT(r, "tensors", 0), "dtype", json_string("Q8_0")))
REJECT(tensor_xxh3_garbage, "tensors[0].xxh3",
       SET(AT(r, "tensors", 0), "xxh3", json_string("0xnothex")))
REJECT(tensor_layout_slash, "tensors[0].layout",
       SET(AT(r, "tensors", 0), "layout", json_string("a/b")))
REJECT(tensor_layout_empty, "tensors[0].layout",
       SET(AT(r, "tensors", 0), "layout", json_string("")))
REJECT(tensor_layout_other_kind,
       "tensors[0].layout: 'processed:v2' in a "
       "model whose layout is checkpoint",
       SET(AT(r, "tensors", 0), "layout", json_string("processed:v2")))
REJECT(tensor_layout_number, "tensors[0].layout",
       SET(AT(r, "tensors", 0), "layout", json_integer(3)))
REJECT(tensor_shape_negative, "tensors[0].shape[0]",
       json_array_set_new(json_object_get(AT(r, "tensors", 0), "shape"), 0,
			  json_integer(-3)))

/* Thin: what a source serves of a content the asker has; no checksums,
 * tensors or signature, the same content, identity and layout; a full
 * manifest is not thin. */
START_TEST(thin_form)
{
	struct sfs_manifest *m = sample(), *d, *f;
	char *a, *b;
	size_t al, bl;

	const unsigned bare = SFS_MF_ENC_THIN | SFS_MF_ENC_BARE;
	/* Only a re-seeder's thin manifest, asked bare, leaves the files'
	 * extents out (thin=1 askers of older builds require them); a
	 * seed's without them is refused, naming the field. */
	ck_assert_int_eq(sfs_manifest_encode_with(m, bare, &a, &al), 0);
	ck_assert_ptr_nonnull(strstr(a, "\"extents\""));
	free(a);
	m->holdings = 1;
	ck_assert_int_eq(sfs_manifest_encode_with(m, SFS_MF_ENC_THIN, &a, &al),
			 0);
	ck_assert_ptr_nonnull(strstr(a, "\"extents\""));
	ck_assert_int_eq(sfs_manifest_decode(a, al, &d, err, sizeof(err)), 0);
	ck_assert_uint_gt(d->files[1].next, 0);
	sfs_manifest_free(d);
	free(a);
	m->holdings = 0;
	ck_assert_int_eq(sfs_manifest_encode_with(m, SFS_MF_ENC_THIN, &a, &al),
			 0);
	char *cut = strstr(a, "\"extents\"");
	ck_assert_ptr_nonnull(cut);
	memcpy(cut, "\"extentz\"", 9);
	ck_assert_int_eq(sfs_manifest_decode(a, al, &d, err, sizeof(err)),
			 -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "files[0].extents: missing"));
	free(a);
	m->holdings = 1;
	ck_assert_int_eq(sfs_manifest_encode_with(m, bare, &a, &al), 0);
	ck_assert_ptr_null(strstr(a, "\"extents\""));
	ck_assert_ptr_null(strstr(a, "\"inline\""));
	ck_assert_int_eq(sfs_manifest_encode(m, &b, &bl), 0);
	ck_assert_ptr_nonnull(strstr(b, "\"inline\""));
	ck_assert_ptr_nonnull(strstr(b, "feedfacecafebeef"));
	SFS_TEST_BOUND_EQ("thin_checksum_values", 0,
			  strstr(a, "feedfacecafebeef") != NULL);
	SFS_TEST_BOUND_LT("thin_pct_of_whole", 100, al * 100 / bl);
	ck_assert_int_eq(sfs_manifest_decode(a, al, &d, err, sizeof(err)), 0);
	ck_assert_int_eq(sfs_manifest_decode(b, bl, &f, err, sizeof(err)), 0);
	ck_assert_int_eq(d->thin, 1);
	ck_assert_int_eq(f->thin, 0);
	ck_assert_uint_eq(d->content, f->content);
	ck_assert_uint_eq(d->nfiles, f->nfiles);
	SFS_TEST_BOUND_EQ("thin_tensors", 0, d->ntensors);
	ck_assert_uint_gt(f->ntensors, 0);
	for (size_t i = 0; i < d->nfiles; i++) {
		ck_assert_uint_eq(d->files[i].csum_shift, 0);
		ck_assert_uint_eq(d->files[i].next, 0);
		ck_assert(f->files[i].next > 0 || !f->files[i].size);
		ck_assert_uint_eq(d->files[i].size, f->files[i].size);
		ck_assert_uint_eq(d->files[i].xxh3, f->files[i].xxh3);
	}
	ck_assert_uint_eq(f->files[1].csum_shift, 12);
	ck_assert_int_eq(sfs_identity_differs(&d->id, &f->id, err, sizeof(err)),
			 0);
	ck_assert_uint_eq(d->nregions, f->nregions);
	free(a);
	free(b);
	sfs_manifest_free(f);
	/* "thin" must be a boolean. */
	ck_assert_int_eq(sfs_manifest_encode(m, &b, &bl), 0);
	char *t = malloc(bl + 32);
	ck_assert_ptr_nonnull(t);
	ck_assert_ptr_nonnull(strchr(b, '{'));
	int n = snprintf(t, bl + 32, "{\"thin\": 1,%s", strchr(b, '{') + 1);
	ck_assert_int_eq(
		sfs_manifest_decode(t, (size_t)n, &f, err, sizeof(err)),
		-EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "thin"));
	free(t);
	free(b);
	sfs_manifest_free(d);
	sfs_manifest_free(m);
}
END_TEST

START_TEST(reject_not_json)
{
	struct sfs_manifest *d;
	ck_assert_int_eq(
		sfs_manifest_decode("{\"a\":", 5, &d, err, sizeof(err)),
		-EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "not valid JSON"));
	ck_assert_int_eq(sfs_manifest_decode("[]", 2, &d, err, sizeof(err)),
			 -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "not a JSON object"));
}
END_TEST

START_TEST(reject_oversize)
{
	struct sfs_manifest *d;
	ck_assert_int_eq(sfs_manifest_decode("{}", SFS_MANIFEST_MAX + 1ul, &d,
					     err, sizeof(err)),
			 -EINVAL);
	ck_assert_ptr_nonnull(strstr(err, "exceeds the cap"));
}
END_TEST

START_TEST(extent_lookup_boundaries)
{
	struct sfs_manifest *m = sample();
	/* sub/deeper/big.bin: [0,100) region, [100,101) inline,
	 * [101,301) region */
	const struct sfs_mfile *f = &m->files[3];
	static const struct {
		uint64_t off;
		ssize_t want;
	} cases[] = {{0, 0},	{1, 0},		 {99, 0},  {100, 1},
		     {101, 2},	{102, 2},	 {300, 2}, {301, -1},
		     {302, -1}, {UINT64_MAX, -1}};
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
		ck_assert_msg(sfs_mfile_find_extent(f, cases[i].off) ==
				      cases[i].want,
			      "offset %llu", (unsigned long long)cases[i].off);
	/* model.safetensors: [0,10) inline, [10,1000) region */
	f = &m->files[1];
	ck_assert_int_eq(sfs_mfile_find_extent(f, 9), 0);
	ck_assert_int_eq(sfs_mfile_find_extent(f, 10), 1);
	ck_assert_int_eq(sfs_mfile_find_extent(f, 999), 1);
	ck_assert_int_eq(sfs_mfile_find_extent(f, 1000), -1);
	/* an empty file has no extent at all */
	ck_assert_int_eq(sfs_mfile_find_extent(&m->files[2], 0), -1);
	sfs_manifest_free(m);
}
END_TEST

START_TEST(path_rules)
{
	const char *why;
	ck_assert_int_eq(sfs_path_check("a/b.c", &why), 0);
	ck_assert_int_eq(sfs_path_check(".hidden/x", &why), 0);
	ck_assert_int_eq(sfs_path_check("", &why), -EINVAL);
	ck_assert_int_eq(sfs_path_check("a/", &why), -EINVAL);
	ck_assert_int_eq(sfs_path_check("./a", &why), -EINVAL);
	ck_assert_int_eq(sfs_path_check(".seedfs", &why), -EINVAL);
	ck_assert_int_eq(sfs_path_check("x/.seedfs", &why), 0);
	/* Names show in status lines and logs: no control characters, no
	 * bytes that are not UTF-8 (a newline would forge a line). */
	static const char *const forged[] = {
		"m\nready\n", "m\rx",	     "a/b\tc",	       "m\x1b[2J",
		"del\x7f",    "nel\xc2\x85", "ls\xe2\x80\xa8", "bad\xff",
		"cut\xc3",    "over\xc0\xaf"};
	for (size_t i = 0; i < sizeof(forged) / sizeof(forged[0]); i++) {
		ck_assert_msg(sfs_path_check(forged[i], &why) == -EINVAL,
			      "took forged[%zu]", i);
		ck_assert_str_eq(why, "holds a control character or a byte "
				      "that is not UTF-8");
	}
	ck_assert_int_eq(sfs_path_check("caf\xc3\xa9/mod\xc3\xa8le 7b", &why),
			 0);
	char longname[300];
	memset(longname, 'a', 256);
	longname[256] = '\0';
	ck_assert_int_eq(sfs_path_check(longname, &why), -EINVAL);
}
END_TEST

static Suite *suite(void)
{
	Suite *s = suite_create("manifest");
	TCase *t = tcase_create("codec"), *b = tcase_create("reject");
	tcase_add_test(t, round_trip);
	tcase_add_test(t, thin_form);
	tcase_add_test(t, signed_form);
	tcase_add_test(t, signature_lapses);
	tcase_add_test(t, content_digest);
	tcase_add_test(t, extent_lookup_boundaries);
	tcase_add_test(t, path_rules);
	tcase_add_test(b, reject_not_json);
	tcase_add_test(b, reject_oversize);
	tcase_add_test(b, valid_until_zero);
	tcase_add_test(b, valid_until_string);
	tcase_add_test(b, valid_until_before);
	tcase_add_test(b, signer_blank);
	tcase_add_test(b, signer_empty);
	tcase_add_test(b, signer_long);
	tcase_add_test(b, signer_newline);
	tcase_add_test(b, signer_run_zero);
	tcase_add_test(b, signer_run_number);
	tcase_add_test(b, version_missing);
	tcase_add_test(b, version_unknown);
	tcase_add_test(b, version_old);
	tcase_add_test(b, content_missing);
	tcase_add_test(b, content_wrong);
	tcase_add_test(b, file_digest_missing);
	tcase_add_test(b, file_digest_changed);
	tcase_add_test(b, checksum_algorithm);
	tcase_add_test(b, checksum_chunk_size);
	tcase_add_test(b, checksum_count);
	tcase_add_test(b, checksum_upper);
	tcase_add_test(b, mode_too_big);
	tcase_add_test(b, mode_negative);
	tcase_add_test(b, mtime_not_int);
	tcase_add_test(b, mtime_without_mode);
	tcase_add_test(b, root_mode_bad);
	tcase_add_test(b, dir_v3_string);
	tcase_add_test(b, model_missing);
	tcase_add_test(b, model_slash);
	tcase_add_test(b, model_dotdot);
	tcase_add_test(b, model_empty);
	tcase_add_test(b, generation_negative);
	tcase_add_test(b, endpoints_missing);
	tcase_add_test(b, endpoints_empty);
	tcase_add_test(b, endpoints_too_many);
	tcase_add_test(b, protocol_empty);
	tcase_add_test(b, protocol_twice);
	tcase_add_test(b, address_not_hex);
	tcase_add_test(b, compat_number);
	tcase_add_test(b, compat_control_char);
	tcase_add_test(b, compat_too_long);
	tcase_add_test(b, skipped_not_object);
	tcase_add_test(b, skipped_count_zero);
	tcase_add_test(b, skipped_more_paths_than_count);
	tcase_add_test(b, skipped_too_many_paths);
	tcase_add_test(b, skipped_path_long);
	tcase_add_test(t, skipped_round_trip);
	tcase_add_test(b, regions_not_array);
	tcase_add_test(b, region_id_mismatch);
	tcase_add_test(b, region_length_zero);
	tcase_add_test(b, region_remote_count);
	tcase_add_test(b, raw_key_not_hex);
	tcase_add_test(b, raw_key_too_long);
	tcase_add_test(b, region_address_number);
	tcase_add_test(b, region_key_garbage);
	tcase_add_test(b, region_wraps);
	tcase_add_test(b, dirs_missing);
	tcase_add_test(b, dir_absolute);
	tcase_add_test(b, dir_dotdot);
	tcase_add_test(b, dir_empty_component);
	tcase_add_test(b, dir_duplicate);
	tcase_add_test(b, dir_parent_missing);
	tcase_add_test(b, file_reserved_name);
	tcase_add_test(b, file_dotdot);
	tcase_add_test(b, file_duplicate);
	tcase_add_test(b, file_is_dir);
	tcase_add_test(b, file_parent_missing);
	tcase_add_test(b, file_size_mismatch);
	tcase_add_test(b, file_size_over_cap);
	tcase_add_test(b, extents_missing);
	tcase_add_test(b, extent_neither);
	tcase_add_test(b, extent_bad_base64);
	tcase_add_test(b, extent_noncanonical_base64);
	tcase_add_test(b, extent_region_unknown);
	tcase_add_test(b, extent_past_region);
	tcase_add_test(b, extent_length_zero);
	tcase_add_test(b, tensor_file_unknown);
	tcase_add_test(b, tensor_dtype_unknown);
	tcase_add_test(b, tensor_shape_mismatch);
	tcase_add_test(b, tensor_past_file);
	tcase_add_test(b, tensor_shape_negative);
	tcase_add_test(b, identity_id_wrong);
	tcase_add_test(b, identity_id_missing);
	tcase_add_test(b, identity_model_differs);
	tcase_add_test(b, identity_generation_differs);
	tcase_add_test(b, identity_rank_too_big);
	tcase_add_test(b, identity_unknown_key);
	tcase_add_test(b, tensor_ggml_partial_block);
	tcase_add_test(b, tensor_xxh3_garbage);
	tcase_add_test(b, tensor_layout_slash);
	tcase_add_test(b, tensor_layout_empty);
	tcase_add_test(b, tensor_layout_number);
	tcase_add_test(b, tensor_layout_other_kind);
	suite_add_tcase(s, t);
	suite_add_tcase(s, b);
	return s;
}

int main(void)
{
	return sfs_check_run(suite());
}
