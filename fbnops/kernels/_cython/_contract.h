/* GENERATED from fbnops/kernels/_plan.py by `python -m fbnops.kernels._plan`: do not edit. */
#ifndef FBNOPS_CONTRACT_H
#define FBNOPS_CONTRACT_H

#define FB_MAX_W 1024 /* the widest row: the size of the items' stack buffers */
#define FB_STRIP_PIECES 8 /* pieces a strip sums per load and store of its totals */

#define FB_RED_GRAD 0
#define FB_RED_SUM 1
#define FB_RED_SQ 2
#define FB_APPLY_FULL 0
#define FB_APPLY_B 1
#define FB_APPLY_A 2

/* Whether a reduction pass adds to total h (_adds_to). */
static inline int fb_adds_to(int mode, int h) { return (mode != ((h == 0) ? FB_RED_SQ : FB_RED_SUM)); }

#endif
