/*
 * The compiled-module cache on disk: see cache.h for the format and the
 * contract.  The design follows CuPy, PyTorch and libgpuarray (reference
 * notes, kernels.md section 5): a hashed key names the file, the payload is
 * checksummed and checked on every load, and a write goes to a temporary
 * file in the same directory that is renamed into place.
 */
#include "cache.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pwd.h>
#include <stdbool.h>
#include <stdio.h> /* renameat */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include "../core/core.h"
#include "sha256.h"

struct dv__kcache {
  int dirfd;  /* the directory that was checked; every access is relative to it */
  char *path; /* for messages and dv__kcache_path */
};

static const char dv__kcache_magic[8] = {'D', 'V', 'K', 'C', 'A', 'C', 'H', 'E'};

#define HEX_LEN (2 * DV__KCACHE_KEY_SIZE)
#define EXT_LEN (sizeof DV__KCACHE_EXT - 1)
#define TMP_LEN (sizeof DV__KCACHE_TMP - 1)
#define SUFFIX_LEN 12
#define NAME_CAP (HEX_LEN + TMP_LEN + SUFFIX_LEN + 1)

/* ---- paths ---- */

static char *path_join(const char *a, const char *b) {
  size_t na = strlen(a), nb = strlen(b);
  char *p = dv__malloc(na + 1 + nb + 1);
  if (!p) return NULL;
  memcpy(p, a, na);
  p[na] = '/';
  memcpy(p + na + 1, b, nb + 1);
  return p;
}

/* The home directory from the password database (HOME unset or empty). */
static dv_status home_from_passwd(char **out) {
  size_t cap = 16384;
  char *buf = dv__malloc(cap);
  if (!buf) return dv__error(DV_ERR_HOST_OUT_OF_MEMORY, "kernel cache: out of memory");
  struct passwd pw, *res = NULL;
  int e = getpwuid_r(geteuid(), &pw, buf, cap, &res);
  dv_status rc = DV_OK;
  if (e != 0 || !res || !pw.pw_dir || pw.pw_dir[0] != '/') {
    rc = dv__error(DV_ERR_INVALID_ARGUMENT,
                   "kernel cache: no directory: kernel_cache_dir, XDG_CACHE_HOME and HOME are unset "
                   "and uid %u has no home directory%s%s",
                   (unsigned)geteuid(), e ? ": " : "", e ? strerror(e) : "");
  } else {
    *out = path_join(pw.pw_dir, ".cache/devarray/kernels");
    if (!*out) rc = dv__error(DV_ERR_HOST_OUT_OF_MEMORY, "kernel cache: out of memory");
  }
  dv__free(buf);
  return rc;
}

/* The directory the options name (see dv__kcache_open), dv__malloc'ed,
 * without trailing slashes. */
static dv_status resolve_dir(const char *dir_option, char **out) {
  *out = NULL;
  const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
  char *p = NULL;
  if (dir_option && dir_option[0]) {
    p = dv__strdup(dir_option);
  } else if (xdg && xdg[0] == '/') {
    /* The XDG base directory specification: a relative path is invalid and
     * is ignored. */
    p = path_join(xdg, "devarray/kernels");
  } else if (home && home[0]) {
    p = path_join(home, ".cache/devarray/kernels");
  } else {
    dv_status rc = home_from_passwd(&p);
    if (rc) return rc;
  }
  if (!p) return dv__error(DV_ERR_HOST_OUT_OF_MEMORY, "kernel cache: out of memory");
  size_t n = strlen(p);
  while (n > 1 && p[n - 1] == '/') p[--n] = 0;
  *out = p;
  return DV_OK;
}

/* mkdir -p with mode 0700 for every directory created.  Returns 0, or an
 * errno with the failing prefix left in path's first *failed_len bytes. */
static int mkdir_parents(char *path, size_t *failed_len) {
  size_t n = strlen(path);
  for (size_t i = 1; i <= n; i++) {
    if (i < n && path[i] != '/') continue;
    if (i < n && path[i - 1] == '/') continue; /* "a//b" */
    char saved = path[i];
    path[i] = 0;
    int e = mkdir(path, 0700) == 0 ? 0 : errno;
    path[i] = saved;
    if (e && e != EEXIST) {
      *failed_len = i;
      return e;
    }
  }
  return 0;
}

/* ---- file helpers ---- */

static int write_all(int fd, const void *buf, size_t n) {
  const unsigned char *p = buf;
  while (n) {
    size_t chunk = n < ((size_t)1 << 30) ? n : ((size_t)1 << 30);
    ssize_t w = write(fd, p, chunk);
    if (w < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    if (w == 0) return EIO;
    p += w;
    n -= (size_t)w;
  }
  return 0;
}

/* Read up to n bytes; *got < n means the file ended. */
static int read_full(int fd, void *buf, size_t n, size_t *got) {
  unsigned char *p = buf;
  *got = 0;
  while (*got < n) {
    size_t want = n - *got;
    if (want > ((size_t)1 << 30)) want = (size_t)1 << 30;
    ssize_t r = read(fd, p + *got, want);
    if (r < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    if (r == 0) break;
    *got += (size_t)r;
  }
  return 0;
}

static void put_le32(unsigned char *p, uint32_t v) {
  for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i));
}
static void put_le64(unsigned char *p, uint64_t v) {
  for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i));
}
static uint32_t get_le32(const unsigned char *p) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; i--) v = v << 8 | p[i];
  return v;
}
static uint64_t get_le64(const unsigned char *p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; i--) v = v << 8 | p[i];
  return v;
}

static void entry_name(const uint8_t key[DV__KCACHE_KEY_SIZE], char name[NAME_CAP]) {
  char hex[DV__SHA256_HEX];
  dv__sha256_hex(key, hex);
  memcpy(name, hex, HEX_LEN);
  memcpy(name + HEX_LEN, DV__KCACHE_EXT, EXT_LEN + 1);
}

/* 1: an entry name, 2: a temporary file's name, 0: anything else. */
static int name_kind(const char *n) {
  for (int i = 0; i < HEX_LEN; i++) {
    char ch = n[i];
    if (!((ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'f'))) return 0;
  }
  const char *t = n + HEX_LEN;
  if (strcmp(t, DV__KCACHE_EXT) == 0) return 1;
  if (strncmp(t, DV__KCACHE_TMP, TMP_LEN) != 0) return 0;
  t += TMP_LEN;
  size_t len = 0;
  for (; t[len]; len++) {
    char ch = t[len];
    if (!((ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z'))) return 0;
  }
  return len == SUFFIX_LEN ? 2 : 0;
}

/* A name for a temporary file: uniqueness is enforced by O_EXCL, the mix
 * only makes collisions between threads and processes unlikely. */
static void tmp_name(const char *entry, char name[NAME_CAP]) {
  static const char alnum[] = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
  static _Atomic uint64_t counter;
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  uint64_t x = (uint64_t)getpid() << 40 ^ atomic_fetch_add(&counter, 1) << 20 ^
               (uint64_t)ts.tv_nsec ^ (uint64_t)ts.tv_sec << 32;
  /* splitmix64 */
  x += 0x9e3779b97f4a7c15u;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9u;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebu;
  x ^= x >> 31;
  memcpy(name, entry, HEX_LEN);
  memcpy(name + HEX_LEN, DV__KCACHE_TMP, TMP_LEN);
  for (int i = 0; i < SUFFIX_LEN; i++, x /= 62) name[HEX_LEN + TMP_LEN + i] = alnum[x % 62];
  name[HEX_LEN + TMP_LEN + SUFFIX_LEN] = 0;
}

/* ---- open / close ---- */

dv_status dv__kcache_open(const char *dir_option, dv__kcache **out) {
  DV_CHECK_NULL(out);
  *out = NULL;
  char *path;
  dv_status rc = resolve_dir(dir_option, &path);
  if (rc) return rc;

  int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0 && errno == ENOENT) {
    size_t failed = 0;
    int e = mkdir_parents(path, &failed);
    if (e) {
      rc = dv__error(DV_ERR_INVALID_ARGUMENT, "kernel cache directory %s cannot be created: mkdir %.*s: %s",
                     path, (int)failed, path, strerror(e));
      goto fail;
    }
    fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  }
  if (fd < 0) {
    int e = errno;
    rc = dv__error(DV_ERR_INVALID_ARGUMENT, "kernel cache directory %s cannot be opened: %s%s", path,
                   strerror(e), e == ENOTDIR ? " (it, or a parent, is not a directory)" : "");
    goto fail;
  }

  /* Checked through the descriptor: the directory checked is the one used. */
  struct stat st;
  if (fstat(fd, &st) != 0) {
    rc = dv__error(DV_ERR_INVALID_ARGUMENT, "kernel cache directory %s: fstat: %s", path, strerror(errno));
    goto fail;
  }
  if (st.st_uid != geteuid()) {
    rc = dv__error(DV_ERR_INVALID_ARGUMENT,
                   "kernel cache directory %s is owned by uid %u, not by this user (uid %u); "
                   "cached modules are loaded as code, so it must be the user's own",
                   path, (unsigned)st.st_uid, (unsigned)geteuid());
    goto fail;
  }
  if (st.st_mode & (S_IWGRP | S_IWOTH)) {
    rc = dv__error(DV_ERR_INVALID_ARGUMENT,
                   "kernel cache directory %s is writable by %s (mode %03o); cached modules are "
                   "loaded as code, so only its owner may write it (chmod 700 %s)",
                   path, (st.st_mode & S_IWOTH) ? "others" : "its group",
                   (unsigned)(st.st_mode & 07777), path);
    goto fail;
  }
  if (faccessat(fd, ".", W_OK | X_OK, AT_EACCESS) != 0) {
    rc = dv__error(DV_ERR_INVALID_ARGUMENT, "kernel cache directory %s is not writable: %s", path,
                   strerror(errno));
    goto fail;
  }

  dv__kcache *c = dv__malloc(sizeof *c);
  if (!c) {
    rc = dv__error(DV_ERR_HOST_OUT_OF_MEMORY, "kernel cache: out of memory");
    goto fail;
  }
  c->dirfd = fd;
  c->path = path;
  *out = c;
  return DV_OK;

fail:
  if (fd >= 0) close(fd);
  dv__free(path);
  return rc;
}

void dv__kcache_close(dv__kcache *c) {
  if (!c) return;
  close(c->dirfd);
  dv__free(c->path);
  dv__free(c);
}

const char *dv__kcache_path(const dv__kcache *c) { return c ? c->path : NULL; }

/* ---- get ---- */

/* An invalid entry: log it and remove it, unless the name no longer refers
 * to the file that was read (a writer renamed a fresh entry over it since). */
static void discard(dv__kcache *c, const char *name, const struct stat *st, const char *why) {
  struct stat now;
  bool same = fstatat(c->dirfd, name, &now, AT_SYMLINK_NOFOLLOW) == 0 && now.st_dev == st->st_dev &&
              now.st_ino == st->st_ino;
  bool removed = same && unlinkat(c->dirfd, name, 0) == 0;
  dv__log(DV_LOG_DEBUG, "kernel cache: %s/%s: %s; a miss%s", c->path, name, why,
          removed ? ", removed" : same ? ", not removed" : "");
}

dv_status dv__kcache_get(dv__kcache *c, const uint8_t key[DV__KCACHE_KEY_SIZE], void **image,
                         size_t *size) {
  DV_CHECK_NULL(image);
  *image = NULL;
  DV_CHECK_NULL(size);
  *size = 0;
  DV_CHECK_NULL(c);
  DV_CHECK_NULL(key);

  char name[NAME_CAP];
  entry_name(key, name);
  int fd = openat(c->dirfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0) {
    int e = errno;
    if (e == ENOENT) return DV_OK;
    if (e == ELOOP) {
      /* A symbolic link is never an entry; a put replaces it. */
      dv__log(DV_LOG_DEBUG, "kernel cache: %s/%s is a symbolic link; a miss", c->path, name);
      return DV_OK;
    }
    return dv__error(DV__KCACHE_IO_ERROR, "kernel cache: open %s/%s: %s", c->path, name, strerror(e));
  }

  dv_status rc = DV_OK;
  void *buf = NULL;
  const char *bad = NULL; /* why the entry is invalid */
  struct stat st;
  unsigned char h[DV__KCACHE_HEADER];
  size_t got = 0;
  int e;
  if (fstat(fd, &st) != 0) {
    rc = dv__error(DV__KCACHE_IO_ERROR, "kernel cache: fstat %s/%s: %s", c->path, name, strerror(errno));
    goto done;
  }
  if (!S_ISREG(st.st_mode)) {
    dv__log(DV_LOG_DEBUG, "kernel cache: %s/%s is not a regular file; a miss", c->path, name);
    goto done;
  }
  if ((e = read_full(fd, h, sizeof h, &got)) != 0) {
    rc = dv__error(DV__KCACHE_IO_ERROR, "kernel cache: read %s/%s: %s", c->path, name, strerror(e));
    goto done;
  }
  uint64_t length = 0;
  if (got < sizeof h) {
    bad = "shorter than a header";
  } else if (memcmp(h, dv__kcache_magic, sizeof dv__kcache_magic) != 0) {
    bad = "bad magic";
  } else if (get_le32(h + 8) != DV__KCACHE_FORMAT) {
    bad = "another format version";
  } else if (get_le32(h + 12) != DV__KCACHE_HEADER) {
    bad = "bad header size";
  } else if ((length = get_le64(h + 16)) > (uint64_t)SIZE_MAX - DV__KCACHE_HEADER ||
             (uint64_t)st.st_size != DV__KCACHE_HEADER + length) {
    bad = "payload length does not match the file size (truncated or extended)";
  } else if (memcmp(h + 56, key, DV__KCACHE_KEY_SIZE) != 0) {
    bad = "holds another key (a foreign entry)";
  }
  if (bad) goto done;

  buf = dv__malloc((size_t)length);
  if (!buf) {
    rc = dv__error(DV_ERR_HOST_OUT_OF_MEMORY, "kernel cache: out of memory reading %" PRIu64 " bytes",
                   length);
    goto done;
  }
  if ((e = read_full(fd, buf, (size_t)length, &got)) != 0) {
    rc = dv__error(DV__KCACHE_IO_ERROR, "kernel cache: read %s/%s: %s", c->path, name, strerror(e));
    goto done;
  }
  if (got != length) {
    bad = "truncated while read"; /* the tail of buf was never written: hash nothing */
  } else {
    uint8_t sum[DV__SHA256_SIZE];
    dv__sha256(buf, (size_t)length, sum);
    if (memcmp(sum, h + 24, sizeof sum) != 0) bad = "payload checksum does not match";
  }

done:
  if (bad) discard(c, name, &st, bad);
  close(fd);
  if (rc || bad || !buf) {
    dv__free(buf);
    return rc;
  }
  *image = buf;
  *size = (size_t)length;
  return DV_OK;
}

/* ---- put ---- */

dv_status dv__kcache_put(dv__kcache *c, const uint8_t key[DV__KCACHE_KEY_SIZE], const void *image,
                         size_t size) {
  DV_CHECK_NULL(c);
  DV_CHECK_NULL(key);
  if (size) DV_CHECK_NULL(image);

  unsigned char h[DV__KCACHE_HEADER];
  memcpy(h, dv__kcache_magic, sizeof dv__kcache_magic);
  put_le32(h + 8, DV__KCACHE_FORMAT);
  put_le32(h + 12, DV__KCACHE_HEADER);
  put_le64(h + 16, (uint64_t)size);
  dv__sha256(image, size, h + 24);
  memcpy(h + 56, key, DV__KCACHE_KEY_SIZE);

  char name[NAME_CAP], tmp[NAME_CAP];
  entry_name(key, name);
  int fd = -1, e = 0;
  for (int tries = 0; tries < 100; tries++) {
    tmp_name(name, tmp);
    fd = openat(c->dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd >= 0 || errno != EEXIST) break;
  }
  if (fd < 0)
    return dv__error(DV__KCACHE_IO_ERROR, "kernel cache: create a temporary file in %s: %s", c->path,
                     strerror(errno));

  const char *op = "write";
  e = write_all(fd, h, sizeof h);
  if (!e && size) e = write_all(fd, image, size);
  /* The data must be on disk before the name is: after a crash the rename
   * may survive and the contents not (ext4 delayed allocation). */
  if (!e && fsync(fd) != 0) op = "fsync", e = errno;
  /* Some file systems (NFS) report write errors only at close. */
  if (close(fd) != 0 && !e) op = "close", e = errno;
  /* The directory is not synced: an entry lost in a crash is only a miss. */
  if (!e && renameat(c->dirfd, tmp, c->dirfd, name) != 0) op = "rename", e = errno;
  if (e) {
    unlinkat(c->dirfd, tmp, 0);
    return dv__error(DV__KCACHE_IO_ERROR, "kernel cache: %s %s/%s: %s", op, c->path,
                     strcmp(op, "rename") == 0 ? name : tmp, strerror(e));
  }
  return DV_OK;
}

/* ---- usage / clear ---- */

/* Open the directory dir_option names without creating it: *dir NULL when
 * it does not exist. */
static dv_status open_existing(const char *dir_option, char **path, DIR **dir) {
  *dir = NULL;
  dv_status rc = resolve_dir(dir_option, path);
  if (rc) return rc;
  int fd = open(*path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0 && errno == ENOENT) return DV_OK;
  if (fd >= 0 && (*dir = fdopendir(fd)) != NULL) return DV_OK;
  int e = errno;
  if (fd >= 0) close(fd);
  return dv__error(DV_ERR_INVALID_ARGUMENT, "kernel cache directory %s cannot be read: %s", *path,
                   strerror(e));
}

dv_status dv__kcache_usage(const char *dir_option, uint64_t *entries, uint64_t *bytes, char *path,
                           size_t cap) {
  if (entries) *entries = 0;
  if (bytes) *bytes = 0;
  if (path && cap) path[0] = 0;
  char *p = NULL;
  DIR *d;
  dv_status rc = open_existing(dir_option, &p, &d);
  if (rc) {
    dv__free(p);
    return rc;
  }
  if (path) {
    size_t n = strlen(p);
    if (n >= cap) {
      rc = dv__error(DV_ERR_INVALID_ARGUMENT, "kernel cache: path of %zu bytes does not fit in %zu",
                     n + 1, cap);
      goto done;
    }
    memcpy(path, p, n + 1);
  }
  uint64_t count = 0, total = 0;
  for (struct dirent *ent; d && (ent = readdir(d)) != NULL;) {
    struct stat st;
    if (name_kind(ent->d_name) != 1) continue;
    if (fstatat(dirfd(d), ent->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode)) continue;
    count++;
    total += (uint64_t)st.st_size;
  }
  if (entries) *entries = count;
  if (bytes) *bytes = total;
done:
  if (d) closedir(d);
  dv__free(p);
  return rc;
}

dv_status dv__kcache_clear(const char *dir_option) {
  char *p = NULL;
  DIR *d;
  dv_status rc = open_existing(dir_option, &p, &d);
  /* Go on after a failure: remove what can be removed. */
  for (struct dirent *ent; d && (ent = readdir(d)) != NULL;) {
    if (name_kind(ent->d_name) == 0) continue;
    if (unlinkat(dirfd(d), ent->d_name, 0) != 0 && errno != ENOENT && rc == DV_OK)
      rc = dv__error(DV__KCACHE_IO_ERROR, "kernel cache: remove %s/%s: %s", p, ent->d_name,
                     strerror(errno));
  }
  if (d) closedir(d);
  dv__free(p);
  return rc;
}
