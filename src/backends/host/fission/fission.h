/*
 * Region fission (fast mode): a pure text transform on a kernel module's
 * preprocessed unit, through libclang.  For each kernel whose barriers sit
 * in straight-line code or uniform loops it writes a function,
 * dv__fis_<kernel>, that runs a block as loops over its threads between
 * barriers (fission.c: libclang, the tree, the plan; fission_text.c:
 * questions on the text and tree, uniform values; fission_gen.c: the code).
 * It knows nothing of the simulator: toolchain/ calls it on the text it
 * compiles.  Its own files share fission_internal.h.
 */
#ifndef DV_HOST_FISSION_H
#define DV_HOST_FISSION_H
#include <stdbool.h>
#include <stddef.h>

/* Can region fission run here (libclang found and complete)? */
bool hk_fission_available(void);
/* The fission functions (dv__fis_<kernel>, runs one block; a kernel.h
 * record's `stop` set to 2 on entry: declined, its per-thread state does
 * not fit dv__fis_room bytes of stack) for the kernels of the
 * preprocessed unit pre[0..n) the pass accepts, to append to it; NULL:
 * none, or no memory (*oom then set).  note gets a line per kernel
 * (accepted, or refused and why). */
char *hk_fission(const char *pre, size_t n, char *note, size_t cap, bool *oom);

#endif
