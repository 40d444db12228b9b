/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Core-internal buffer hooks: per-thread cache release and a test hook
 * counting segment visits (so a unit test can prove append never walks).
 */
#ifndef SLUICE_BUF_INT_H
#define SLUICE_BUF_INT_H

#include <sluice/buf.h>

/* Size of the data area of a default block (what socket reads use). */
#define SL_BUF_BLOCK_SIZE (16384u - 64u)

/* Release the calling thread's segment and block caches (thread exit). */
void sl__buf_thread_cleanup(void);
/* Segments visited by walking operations on this thread since start. */
uint64_t sl__buf_seg_visits(void);

#endif
