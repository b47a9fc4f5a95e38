/* SPDX-License-Identifier: MIT */
/*
 * tview.h - the tensor view's metadata: NAME/.seedfs/tensors/T.json and
 * the user.seedfs.* extended attributes (docs/tensors.md).  No FUSE
 * types here; fsops replies with what these return.  Pure functions of
 * their arguments, thread safe.
 */
#ifndef SFS_TVIEW_H
#define SFS_TVIEW_H

#include <stddef.h>
#include <stdint.h>

struct sfs_manifest;
struct sfs_mtensor;
struct sfs_mfile;

/* The layout of @t: its own, else the model's (its identity's; NULL
 * @t: the model's). [borrowed] */
const char *sfs_tview_layout(const struct sfs_manifest *m,
			     const struct sfs_mtensor *t);

/*
 * sfs_tview_json - the text of @t's .json file: *out [new, free()], *len
 * bytes.  @cached is how many of its bytes are in the replica's memory;
 * it is printed in a fixed width, so the length depends on nothing else
 * that changes while mounted (stat tells it with @cached = 0).  Returns
 * 0 or -ENOMEM.
 */
int sfs_tview_json(const struct sfs_manifest *m, const struct sfs_mtensor *t,
		   const char *seed, uint64_t cached, char **out, size_t *len);

/*
 * sfs_tview_xattr - value of attribute @name ("user.seedfs.dtype", ...)
 * of a tensor (@t set) or of a model file (@t NULL, @f set): *out [new,
 * free()], *len bytes, no NUL.  Returns 0, -ENODATA for an attribute the
 * node does not have, -ENOMEM.
 */
int sfs_tview_xattr(const struct sfs_manifest *m, const struct sfs_mtensor *t,
		    const struct sfs_mfile *f, const char *seed,
		    const char *name, char **out, size_t *len);

/*
 * sfs_tview_xattr_list - the NUL-separated names the node has, as
 * listxattr returns them: *out [new, free()], *len bytes.  Returns 0 or
 * -ENOMEM.
 */
int sfs_tview_xattr_list(const struct sfs_manifest *m,
			 const struct sfs_mtensor *t, const struct sfs_mfile *f,
			 const char *seed, char **out, size_t *len);

#endif /* SFS_TVIEW_H */
