/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Buffer chain types. These layouts are part of the module ABI because the
 * hot path (protocol framing) reads segments inline.
 *
 * A block is a reference-counted chunk of bytes. A segment is a window
 * [start, end) onto one block and a link in a chain. A chain (struct sl_buf)
 * caches its head, its tail and its total length, so append is O(1).
 *
 * An all-zero struct sl_buf is a valid empty chain.
 */
#ifndef SLUICE_BUF_T_H
#define SLUICE_BUF_T_H

#include <stdatomic.h>
#include <sluice/ccdefs.h>

struct sl_block {
    atomic_uint refs;       /* segments (in any chain) pointing at it */
    uint32_t size;          /* usable bytes in data[] */
    unsigned char data[];
};

struct sl_seg {
    struct sl_seg *next;
    struct sl_block *block;
    unsigned char *start;   /* first byte of the window, inside block */
    unsigned char *end;     /* one past the last byte of the window */
};

struct sl_buf {
    struct sl_seg *head;
    struct sl_seg *tail;
    size_t len;             /* sum of (end - start) over all segments */
};

#endif
