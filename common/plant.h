/* A planted data race, for one test only (tests/integration/tsan_sees.sh).
 *
 * The ThreadSanitizer tier must see our code when a library calls it: a
 * FUSE handler under libfuse's worker threads, a control-port handler
 * under libmicrohttpd.  The `seedfs_plant` binary, built only in the
 * ThreadSanitizer build with SEEDFS_TSAN_PLANT defined, calls
 * SFS_TSAN_PLANT() in one FUSE handler (fs/fsops.c, read) and in the
 * control port's request handler (control/ctlsrv.c); the test passes
 * only when ThreadSanitizer reports the race with that handler in the
 * stack.  Every other build compiles the macro to nothing. */
#ifndef SFS_COMMON_PLANT_H
#define SFS_COMMON_PLANT_H

#ifdef SEEDFS_TSAN_PLANT
/* An unsynchronized write to a word that a thread started by the
 * previous call also wrote: the second call from any thread is a data
 * race.  Thread safety: none, on purpose. */
void sfs_tsan_plant(void);
#define SFS_TSAN_PLANT() sfs_tsan_plant()
#else
#define SFS_TSAN_PLANT()                                                       \
	do {                                                                   \
	} while (0)
#endif

#endif
