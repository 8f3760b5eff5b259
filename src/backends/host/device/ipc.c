/*
 * The host simulator's shareable device memory (option host_ipc) and its
 * IPC methods.
 *
 * With host_ipc on, each device block is a mapping of its own memfd
 * (MAP_SHARED, without guard pages; guard bytes, poisoning and quarantine
 * work as for the other blocks) and the descriptor stays open while the block lives.  A payload
 * names it by (pid, fd, inode, device): another process of the same user
 * opens /proc/<pid>/fd/<fd> -- the kernel's own check that it may -- and
 * maps it.  Stale payloads are detected, not guessed:
 *   - the exporter freed the block: the descriptor was closed, so the path
 *     no longer exists, or the number now names another file (another
 *     inode);
 *   - the exporting process exited: /proc/<pid> is gone, or a new process
 *     with that pid has no such descriptor / another inode.
 * A mapping already open stays valid after the exporter frees or exits
 * (the memfd lives while mapped); its contents are then no longer defined,
 * as with CUDA.  Descriptors are close-on-exec.
 *
 * The option is off by default: each block then costs a descriptor
 * (RLIMIT_NOFILE) and three system calls, which the simulator's ordinary
 * allocations should not pay.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "device_internal.h"

typedef struct hb_shared {
  int fd;            /* -1 once revoked */
  size_t map_bytes;  /* the mapping (and the memfd's size) */
  uint64_t ino, dev; /* the memfd's identity */
} hb_shared;

/* The host payload (DV_BIPC_PAYLOAD bytes, this machine's byte order). */
typedef struct hb_ipc_payload {
  uint32_t magic;
  int32_t fd;
  int64_t pid;
  uint64_t ino, dev;
  uint64_t map_bytes;
  uint64_t data_offset; /* of the payload (block->data) in the mapping */
  uint64_t bytes;       /* the block's payload bytes */
} hb_ipc_payload;
_Static_assert(sizeof(hb_ipc_payload) <= DV_BIPC_PAYLOAD, "the host payload must fit");
#define HB_IPC_MAGIC 0x68626970u /* "hbip" */

unsigned char *hb_shared_alloc(hb_block *b, size_t total) {
  hb_shared *sh = calloc(1, sizeof *sh);
  if (!sh) return NULL;
  int fd = memfd_create("devarray-host-device", MFD_CLOEXEC);
  if (fd < 0) {
    free(sh);
    return NULL;
  }
  struct stat s;
  void *p = MAP_FAILED;
  if (ftruncate(fd, (off_t)total) == 0 && fstat(fd, &s) == 0)
    p = mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) {
    close(fd);
    free(sh);
    return NULL;
  }
  sh->fd = fd;
  sh->map_bytes = total;
  sh->ino = (uint64_t)s.st_ino;
  sh->dev = (uint64_t)s.st_dev;
  b->shared = sh;
  return p;
}

void hb_shared_revoke(hb_block *b) {
  hb_shared *sh = b->shared;
  if (sh && sh->fd >= 0) {
    close(sh->fd);
    sh->fd = -1;
  }
}

void hb_shared_free(hb_block *b) {
  hb_shared *sh = b->shared;
  hb_shared_revoke(b);
  munmap(b->base, sh->map_bytes);
  free(sh);
  b->shared = NULL;
}

dv_status hb_ipc_export(void *state, void *buf, unsigned char *payload) {
  (void)state;
  hb_block *b = buf;
  if (!b || b->alias)
    return dv__error(DV_ERR_INVALID_ARGUMENT, "only device memory the simulator allocated can be shared");
  hb_shared *sh = b->shared;
  if (!sh)
    return dv__error(DV_ERR_NOT_SUPPORTED,
                     "the host simulator shares device memory only in contexts created with the "
                     "option host_ipc=on (DV_HOST_IPC=1)");
  if (sh->fd < 0) return dv__error(DV_ERR_INVALID_ARGUMENT, "the device block has been freed");
  hb_ipc_payload pl;
  memset(&pl, 0, sizeof pl);
  pl.magic = HB_IPC_MAGIC;
  pl.fd = sh->fd;
  pl.pid = (int64_t)getpid();
  pl.ino = sh->ino;
  pl.dev = sh->dev;
  pl.map_bytes = sh->map_bytes;
  pl.data_offset = (uint64_t)(b->data - b->base);
  pl.bytes = b->bytes;
  memset(payload, 0, DV_BIPC_PAYLOAD);
  memcpy(payload, &pl, sizeof pl);
  return DV_OK;
}

typedef struct hb_ipc_map {
  void *base;
  size_t bytes;
} hb_ipc_map;

dv_status hb_ipc_open(void *state, const unsigned char *payload, void **native, size_t *bytes,
                      void **token) {
  (void)state;
  *native = NULL, *bytes = 0, *token = NULL;
  hb_ipc_payload pl;
  memcpy(&pl, payload, sizeof pl);
  if (pl.magic != HB_IPC_MAGIC || pl.fd < 0 || pl.pid <= 0 || pl.data_offset > pl.map_bytes ||
      pl.bytes > pl.map_bytes - pl.data_offset)
    return dv__error(DV_ERR_INVALID_ARGUMENT, "not a host simulator IPC handle (damaged?)");
  char path[64];
  snprintf(path, sizeof path, "/proc/%lld/fd/%d", (long long)pl.pid, (int)pl.fd);
  int fd = open(path, O_RDWR | O_CLOEXEC);
  if (fd < 0) {
    int e = errno;
    if (e == ENOENT)
      return dv__error(DV_ERR_INVALID_ARGUMENT,
                       "stale IPC handle: the exporting process %lld has exited or freed the "
                       "memory (%s: %s)", (long long)pl.pid, path, strerror(e));
    return dv__error(DV_ERR_INVALID_ARGUMENT, "cannot open the exported memory (%s): %s", path,
                     strerror(e));
  }
  struct stat s;
  if (fstat(fd, &s) != 0 || (uint64_t)s.st_ino != pl.ino || (uint64_t)s.st_dev != pl.dev ||
      s.st_size < 0 || (uint64_t)s.st_size != pl.map_bytes) {
    close(fd);
    return dv__error(DV_ERR_INVALID_ARGUMENT,
                     "stale IPC handle: descriptor %d of process %lld is no longer the exported "
                     "memory (freed, or the process exited)", (int)pl.fd, (long long)pl.pid);
  }
  hb_ipc_map *m = calloc(1, sizeof *m);
  if (!m) {
    close(fd);
    return dv__error(DV_ERR_HOST_OUT_OF_MEMORY, "cannot allocate an IPC mapping record");
  }
  void *p = mmap(NULL, (size_t)pl.map_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  int e = errno;
  close(fd); /* the mapping keeps the memory */
  if (p == MAP_FAILED) {
    free(m);
    return dv__error(DV_ERR_OUT_OF_MEMORY, "cannot map %llu bytes of exported memory: %s",
                     (unsigned long long)pl.map_bytes, strerror(e));
  }
  m->base = p;
  m->bytes = (size_t)pl.map_bytes;
  *native = (unsigned char *)p + pl.data_offset;
  *bytes = (size_t)pl.bytes;
  *token = m;
  return DV_OK;
}

dv_status hb_ipc_close(void *state, void *token) {
  (void)state;
  hb_ipc_map *m = token;
  if (!m) return dv__error(DV_ERR_INVALID_ARGUMENT, "no IPC mapping");
  int r = munmap(m->base, m->bytes);
  free(m);
  if (r != 0) return dv__error(DV_ERR_DRIVER, "munmap of an IPC mapping failed: %s", strerror(errno));
  return DV_OK;
}
