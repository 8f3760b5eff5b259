/*
 * devarray_dlpack.h: the versioned structure of DLPack 1.x as devarray
 * exchanges it (dv_array_to_dlpack_versioned, dv_array_from_dlpack_versioned
 * in devarray.h), for callers whose <dlpack/dlpack.h> is older than 1.0.
 *
 * Written from the DLPack specification (dmlc/dlpack, "DLManagedTensorVersioned"):
 * a DLPackVersion {major, minor}, then manager_ctx, deleter, a 64-bit flags
 * word, and the DLTensor of every version.  The names are devarray's
 * (dv_dlpack_*, DV_DLPACK_*), so that this header and a 1.x dlpack.h can be
 * included together; with a 1.x header (it defines DLPACK_MAJOR_VERSION) the
 * layouts are checked equal at compile time and a DLManagedTensorVersioned *
 * may be cast to struct dv_dlpack_versioned * and back.
 *
 * Includes <dlpack/dlpack.h> (for DLTensor).
 */
#ifndef DEVARRAY_DLPACK_H
#define DEVARRAY_DLPACK_H

#include <stddef.h>
#include <stdint.h>

#include <dlpack/dlpack.h>

#ifdef __cplusplus
extern "C" {
#endif

/** The DLPack version devarray writes into the tensors it exports (1.0). */
#define DV_DLPACK_MAJOR 1
#define DV_DLPACK_MINOR 0

/** flags: the consumer must not write the tensor's memory (DLPACK_FLAG_BITMASK_READ_ONLY). */
#define DV_DLPACK_FLAG_READ_ONLY ((uint64_t)1 << 0)
/** flags: the tensor is a copy the producer made for this exchange (DLPACK_FLAG_BITMASK_IS_COPIED). */
#define DV_DLPACK_FLAG_IS_COPIED ((uint64_t)1 << 1)
/** flags (1.1): sub-byte elements are padded to a byte (DLPACK_FLAG_BITMASK_IS_SUBBYTE_TYPE_PADDED). */
#define DV_DLPACK_FLAG_SUBBYTE_PADDED ((uint64_t)1 << 2)

/** The PyCapsule name of an unconsumed 1.x tensor (the Python protocol). */
#define DV_DLPACK_CAPSULE_VERSIONED "dltensor_versioned"
/** The PyCapsule name a consumer gives a 1.x tensor it has taken. */
#define DV_DLPACK_CAPSULE_VERSIONED_USED "used_dltensor_versioned"

/** DLPackVersion: a major version change breaks the ABI; a minor one only adds. */
typedef struct dv_dlpack_version {
  uint32_t major; /**< layout version: a consumer refuses a major version it does not know */
  uint32_t minor; /**< additions within a major version */
} dv_dlpack_version;

/** DLManagedTensorVersioned. */
typedef struct dv_dlpack_versioned {
  dv_dlpack_version version; /**< the DLPack version the producer wrote */
  void *manager_ctx;         /**< the producer's own (devarray's export record) */
  /** Called once by the consumer when it is done (may be NULL). */
  void (*deleter)(struct dv_dlpack_versioned *self);
  uint64_t flags; /**< DV_DLPACK_FLAG_* */
  DLTensor dl_tensor; /**< data, device, dtype, shape, strides (in elements), byte offset */
} dv_dlpack_versioned;

#ifdef DLPACK_MAJOR_VERSION
/* A 1.x dlpack.h: the same layout and flag values as its own (1.x declares
 * it as `struct DLManagedTensorVersioned`, with no typedef). */
#ifdef __cplusplus
#define DV__DLPACK_ASSERT(c, m) static_assert(c, m)
#else
#define DV__DLPACK_ASSERT(c, m) _Static_assert(c, m)
#endif
DV__DLPACK_ASSERT(sizeof(dv_dlpack_versioned) == sizeof(struct DLManagedTensorVersioned),
                  "dv_dlpack_versioned differs from the system's DLManagedTensorVersioned");
DV__DLPACK_ASSERT(offsetof(dv_dlpack_versioned, manager_ctx) ==
                      offsetof(struct DLManagedTensorVersioned, manager_ctx),
                  "dv_dlpack_versioned differs from the system's DLManagedTensorVersioned");
DV__DLPACK_ASSERT(offsetof(dv_dlpack_versioned, deleter) ==
                      offsetof(struct DLManagedTensorVersioned, deleter),
                  "dv_dlpack_versioned differs from the system's DLManagedTensorVersioned");
DV__DLPACK_ASSERT(offsetof(dv_dlpack_versioned, flags) ==
                      offsetof(struct DLManagedTensorVersioned, flags),
                  "dv_dlpack_versioned differs from the system's DLManagedTensorVersioned");
DV__DLPACK_ASSERT(offsetof(dv_dlpack_versioned, dl_tensor) ==
                      offsetof(struct DLManagedTensorVersioned, dl_tensor),
                  "dv_dlpack_versioned differs from the system's DLManagedTensorVersioned");
DV__DLPACK_ASSERT(DV_DLPACK_FLAG_READ_ONLY == DLPACK_FLAG_BITMASK_READ_ONLY &&
                      DV_DLPACK_FLAG_IS_COPIED == DLPACK_FLAG_BITMASK_IS_COPIED,
                  "DV_DLPACK_FLAG_* differ from the system's DLPACK_FLAG_BITMASK_*");
#undef DV__DLPACK_ASSERT
#endif

#ifdef __cplusplus
}
#endif
#endif
