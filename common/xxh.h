/* SPDX-License-Identifier: MIT */
/*
 * xxh.h - xxHash, with XXH3 picked for this CPU at run time.
 *
 * On x86-64, libxxhash's own dispatcher (xxh_x86dispatch.h) replaces
 * XXH3_64bits and its kin with versions that use AVX2 or AVX-512 where
 * the CPU has them: 28-32 GB/s per core here against 5-10 for the
 * SSE2 build Debian ships as the default, and every chunk a mount
 * pulls is checked with it.  The hashes are the same on every path.
 * Only where the library was built with its dispatcher (Debian's shared
 * library is; CMakeLists.txt checks, SEEDFS_XXH_DISPATCH): elsewhere the
 * portable XXH3.  Include this instead of <xxhash.h>.
 */
#ifndef SFS_XXH_H
#define SFS_XXH_H

#include <xxhash.h>
#ifdef SEEDFS_XXH_DISPATCH /* CMakeLists.txt: the library has it */
#include <xxh_x86dispatch.h>
#endif

#endif
