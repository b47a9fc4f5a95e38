/* SPDX-License-Identifier: MIT */
/*
 * tname.h - tensor names as file names, reversibly (docs/tensors.md).
 *
 * A tensor name is any string of 1..4096 bytes; a file name may not hold
 * '/', should not hold control characters, must not be "." or "..", and
 * in MOUNTPOINT/NAME/.seedfs/tensors/ must not end in ".json" (that is
 * the metadata file beside each tensor).  So these bytes become "%XX"
 * (two upper-case hex digits), every other byte stays as it is:
 *
 *   '%' and '/'          always
 *   bytes < 0x20, 0x7f   always
 *   '.'                  when it is the first byte, or the '.' of a
 *                        trailing ".json"
 *
 * Unescaping turns every "%XX" back into its byte; '%' is always
 * escaped, so the mapping is one to one.  Pure functions, thread safe.
 */
#ifndef SFS_TNAME_H
#define SFS_TNAME_H

#include <stddef.h>

/*
 * sfs_tname_escape - write the file name of tensor @name into @out
 * (@outlen bytes, NUL-terminated).  Returns 0, -EINVAL for an empty
 * name, or -ENAMETOOLONG when the result (plus @reserve bytes the caller
 * will append, e.g. 5 for ".json") would exceed 255 bytes or @outlen.
 */
int sfs_tname_escape(const char *name, size_t reserve, char *out,
		     size_t outlen);

/*
 * sfs_tname_unescape - the tensor name of file name @in into @out.
 * Returns 0, -EINVAL for a malformed escape ('%' not followed by two hex
 * digits, or an escape of NUL), -ENAMETOOLONG when @out is too small.
 */
int sfs_tname_unescape(const char *in, char *out, size_t outlen);

#endif /* SFS_TNAME_H */
