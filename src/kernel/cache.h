/*
 * The compiled-module cache on disk (internal).
 *
 * One directory of entries, one file per compiled module, named by the key:
 * "<64 lowercase hex digits of the key>.dvk".  The key is the caller's
 * SHA-256 (sha256.h) over everything that determines the compiled image:
 * source, options, defines, backend, target identity, compiler version.  An
 * entry file is a header then the image (the payload):
 *
 *   offset  size  field (integers little-endian)
 *        0     8  magic "DVKCACHE"
 *        8     4  format version (DV__KCACHE_FORMAT)
 *       12     4  header size in bytes (DV__KCACHE_HEADER)
 *       16     8  payload length in bytes
 *       24    32  SHA-256 of the payload
 *       56    32  the full key
 *       88     -  payload
 *
 * A reader trusts nothing in a file: a wrong magic, version, header size or
 * length, a checksum that does not match, or a key other than the one its
 * name says is a miss, and the file is removed.  Writers never expose a
 * partial file: an entry is written under a temporary name in the same
 * directory ("<hex>.dvk.tmp-XXXXXXXXXXXX", O_EXCL, mode 0600), synced, and
 * renamed into place, so concurrent writers of one key (threads or
 * processes) leave one whole entry and readers see either no entry or a
 * whole one.
 *
 * The directory holds images that get loaded as code (host modules are
 * dlopen'ed), so it must belong to the user and be writable by nobody else;
 * it is opened once and every later access goes through that descriptor,
 * so the directory checked is the directory used.
 *
 * Failures are never fatal to a build: dv__kcache_open's error means "run
 * without a cache" (log one warning), a failed get or put means "compile"
 * (log and go on).  All calls are thread-safe; a dv__kcache may be shared by
 * threads and survives fork.
 */
#ifndef DV_KERNEL_CACHE_H
#define DV_KERNEL_CACHE_H

#include <stddef.h>
#include <stdint.h>

#include "devarray.h"

#define DV__KCACHE_KEY_SIZE 32      /* a key is a SHA-256 digest */
#define DV__KCACHE_FORMAT 1u        /* bump when the entry layout changes */
#define DV__KCACHE_HEADER 88u       /* header bytes before the payload */
#define DV__KCACHE_EXT ".dvk"       /* entry file name: <64 hex of key>.dvk */
#define DV__KCACHE_TMP ".dvk.tmp-"  /* temporary file name: <64 hex>.dvk.tmp-<12 random> */

/*
 * The status of a failed read or write inside a usable cache directory
 * (ENOSPC, EIO, EACCES on an entry...); the detail message names the file,
 * the operation and strerror.  There is no I/O status in dv_status; callers
 * only log it.
 */
#define DV__KCACHE_IO_ERROR DV_ERR_IO

typedef struct dv__kcache dv__kcache;

/*
 * Open (creating it and its missing parents with mode 0700) the cache
 * directory: dir_option when it is neither NULL nor "", else
 * $XDG_CACHE_HOME/devarray/kernels when XDG_CACHE_HOME is an absolute path,
 * else $HOME/.cache/devarray/kernels (HOME, or the password database when
 * HOME is unset or empty).  DV_ERR_INVALID_ARGUMENT, with a message naming
 * the directory and the reason, when it cannot be created or opened, is
 * not a directory, is not owned by the effective user, is writable by its
 * group or others, or is not writable by the user.  DV_ERR_HOST_OUT_OF_MEMORY.
 * *out is NULL on failure.
 */
dv_status dv__kcache_open(const char *dir_option, dv__kcache **out);
/* Close the cache (entries stay on disk).  NULL is a no-op. */
void dv__kcache_close(dv__kcache *c);
/* The directory's path as resolved by dv__kcache_open (owned by c). */
const char *dv__kcache_path(const dv__kcache *c);

/*
 * Look up key.  A hit: DV_OK, *image a dv__malloc'ed copy of the payload
 * (the caller dv__free's it; non-NULL even for an empty payload), *size its
 * length.  A miss: DV_OK, *image NULL, *size 0.  An invalid entry (see
 * above) is a miss, logged at debug level, and removed.  Errors (with
 * *image NULL): DV__KCACHE_IO_ERROR when the entry exists but cannot be
 * opened or read, DV_ERR_HOST_OUT_OF_MEMORY, DV_ERR_NULL_ARGUMENT.
 */
dv_status dv__kcache_get(dv__kcache *c, const uint8_t key[DV__KCACHE_KEY_SIZE], void **image,
                         size_t *size);
/*
 * Store image (size bytes; image may be NULL when size is 0) under key,
 * replacing any entry for it.  Atomic as described above.  On failure
 * nothing is left behind (no entry is changed, no temporary file stays) and
 * the status is DV__KCACHE_IO_ERROR or DV_ERR_NULL_ARGUMENT.
 */
dv_status dv__kcache_put(dv__kcache *c, const uint8_t key[DV__KCACHE_KEY_SIZE], const void *image,
                         size_t size);

/*
 * For `devarray info`: the directory dv__kcache_open would use (into path,
 * when path is not NULL: DV_ERR_INVALID_ARGUMENT if cap is too small), and
 * the number of entries and their total size in bytes, headers included
 * (temporary files are not counted).  Creates nothing and checks no
 * permissions: a directory that does not exist holds 0 entries.
 * DV_ERR_INVALID_ARGUMENT when the path exists and is not a directory or
 * cannot be read.  entries and bytes may be NULL; they are 0 on failure.
 */
dv_status dv__kcache_usage(const char *dir_option, uint64_t *entries, uint64_t *bytes, char *path,
                           size_t cap);
/*
 * Remove every entry and every temporary file a writer left behind (only
 * names of those two patterns; nothing else in the directory is touched,
 * nor the directory itself).  A directory that does not exist is already
 * clear (DV_OK).  DV_ERR_INVALID_ARGUMENT when it is not a directory or
 * cannot be read, DV__KCACHE_IO_ERROR when a file could not be removed
 * (the others still are).
 */
dv_status dv__kcache_clear(const char *dir_option);

#endif
