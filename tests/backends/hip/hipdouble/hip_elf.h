/*
 * The HIP test double's reader of AMDGPU code objects (hip_elf.c): what
 * hipModuleLoadData needs from an ELF image that hipRTC (or hipcc) made.
 * Pure: no state, no allocation but the result's arrays; every read is
 * bounds-checked against the image's extent (fuzz-safe).
 */
#ifndef DV_HIP_ELF_H
#define DV_HIP_ELF_H
#include <stddef.h>
#include <stdint.h>

#define HIPELF_NAME_MAX 512 /* longest symbol name taken (with its NUL) */
#define HIPELF_MAX_ARGS 64  /* explicit kernel arguments; more: refused */

typedef struct hipelf_kernel {
  char name[HIPELF_NAME_MAX];
  uint32_t group_seg;   /* kernel descriptor offset 0: static LDS bytes */
  uint32_t private_seg; /* offset 4: scratch bytes per work-item */
  uint32_t kernarg_size; /* offset 8: kernel argument bytes (hidden ones included) */
  /* From the code object's metadata (NT_AMDGPU_METADATA, msgpack), where
   * it has an entry for the kernel: the explicit arguments' sizes in order
   * (the hidden_* ones left out) and the vector registers used. */
  int nargs; /* -1: no metadata for it */
  uint32_t arg_size[HIPELF_MAX_ARGS];
  uint32_t vgprs;
} hipelf_kernel;

typedef struct hipelf_global {
  char name[HIPELF_NAME_MAX];
  uint64_t size;
  const unsigned char *init; /* its bytes in the image; NULL: zero-filled (.bss) */
} hipelf_global;

typedef struct hipelf_module {
  hipelf_kernel *kernels;
  hipelf_global *globals;
  int nkernels, nglobals;
} hipelf_module;

/* The largest image the reader accepts (its extent, from its headers). */
#define HIPELF_MAX_IMAGE ((uint64_t)1 << 30)

/* Reads the image: 0 and *out filled (free with hipelf_free), or
 * HIPELF_INVALID for anything but a 64-bit little-endian EM_AMDGPU ELF whose
 * headers, sections, symbols and kernel descriptors lie within its extent
 * (the end of its section header table, where LLVM writes it: the image's
 * size is not given) and whose metadata, if any, is well-formed msgpack
 * (nested 32 deep at most), HIPELF_NO_MEMORY.  `why` (may be NULL) says what was
 * wrong.  The image must hold at least its extent; a first byte that is not
 * 0x7f is refused after reading it alone, and so on for the magic. */
enum { HIPELF_OK = 0, HIPELF_INVALID = 1, HIPELF_NO_MEMORY = 2 };
int hipelf_read(const void *image, hipelf_module *out, const char **why);
void hipelf_free(hipelf_module *m);

#endif
