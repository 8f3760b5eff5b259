/*
 * The options of a run-time GPU compiler (rtcopts.c): what NVRTC (CUDA,
 * ../cuda/nvrtc.c) and hipRTC (HIP, ../hip/hiprtc.c) are given alike --
 * the program's own options split on white space after the ones the
 * backend sets, and the note a log gets when the compiler rejects one.
 */
#ifndef DV_BACKENDS_RTCOPTS_H
#define DV_BACKENDS_RTCOPTS_H
#include <stdbool.h>
#include <stddef.h>

/* Append the words of `text` to opts[*n..max): text is cut up in place
 * (white space becomes NULs) and the entries point into it, so it must
 * outlive opts.  False (and *n at max) when there are more words than fit. */
bool dv__rtc_split_options(char *text, const char **opts, int *n, int max);

/* "<compiler> <major>.<minor> rejected an option: <every option>\n" in buf
 * (cut at cap), for the head of the compiler's log. */
void dv__rtc_rejected_note(char *buf, size_t cap, const char *compiler, int major, int minor,
                           const char *const *opts, int n);

#endif
