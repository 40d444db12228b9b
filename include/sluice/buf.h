/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Buffer chains (see buf-t.h for the layout).
 *
 * Context: a chain belongs to one thread at a time (the worker that owns
 * the DCB or session holding it); nothing here locks. Blocks are shared
 * between chains by sl_buf_clone() and their reference count is atomic, so
 * a clone may be handed to another worker.
 *
 * Ownership: functions taking a `struct sl_buf *` operate on a chain in
 * place. Functions documented as "takes" free or absorb the chain passed.
 * Heap chains (sl_buf_new) are the currency between modules: route_query,
 * client_reply and sl_dcb_write take ownership of the chain they are given.
 */
#ifndef SLUICE_BUF_H
#define SLUICE_BUF_H

#include <string.h>
#include <sluice/buf-t.h>

/* A new empty heap chain, NULL on allocation failure. */
SL_EXPORT struct sl_buf *sl_buf_new(void);
/* A heap chain holding a copy of data[0..len). NULL on failure. */
SL_EXPORT struct sl_buf *sl_buf_from(const void *data, size_t len);
/* Free a heap chain and its segments (drops block references). NULL ok. */
SL_EXPORT void sl_buf_free(struct sl_buf *buf);
/* Release all segments of an embedded chain; leaves it empty. */
SL_EXPORT void sl_buf_reset(struct sl_buf *buf);

/*
 * Reserve a writable area of at least `min` bytes at the tail: returns a
 * pointer into the last block (reusing its free room when this chain is its
 * only user) or a new block of at least `hint` bytes, and sets *avail to the
 * room available. Commit what was written with sl_buf_commit(). Used for
 * reading from sockets straight into the chain. NULL on allocation failure.
 */
SL_EXPORT unsigned char *sl_buf_reserve(struct sl_buf *buf, size_t min,
                                        size_t hint, size_t *avail);
SL_EXPORT void sl_buf_commit(struct sl_buf *buf, size_t n);

/* Append a copy of data. 0 or -ENOMEM. O(1) apart from the copy. */
SL_EXPORT int sl_buf_append_data(struct sl_buf *buf, const void *data,
                                 size_t len);
/* Move all segments of `other` to the tail of buf; `other` is left empty
 * (it is not freed). O(1). */
SL_EXPORT void sl_buf_append(struct sl_buf *buf, struct sl_buf *other);
/* Drop the first n bytes (n > len drops everything). */
SL_EXPORT void sl_buf_consume(struct sl_buf *buf, size_t n);
/* Move the first n bytes of buf into `out` (appended to out's tail),
 * splitting a segment if needed without copying. 0 or -ENOMEM. */
SL_EXPORT int sl_buf_split(struct sl_buf *buf, size_t n, struct sl_buf *out);
/* Copy n bytes starting at offset off into dst; returns bytes copied. */
SL_EXPORT size_t sl_buf_copy_out(const struct sl_buf *buf, size_t off,
                                 size_t n, void *dst);
/* Make the first n bytes contiguous (copying only if they span segments);
 * returns a pointer to them, NULL if len < n or on allocation failure. */
SL_EXPORT unsigned char *sl_buf_pullup(struct sl_buf *buf, size_t n);
/* Append to `out` segments sharing buf's blocks (no payload copy). */
SL_EXPORT int sl_buf_clone(const struct sl_buf *buf, struct sl_buf *out);
/* A heap clone of buf, NULL on failure. */
SL_EXPORT struct sl_buf *sl_buf_clone_new(const struct sl_buf *buf);
/* Copy the whole chain into one freshly allocated contiguous heap chain. */
SL_EXPORT struct sl_buf *sl_buf_flatten_new(const struct sl_buf *buf);

static inline size_t
sl_buf_len(const struct sl_buf *buf)
{
    return buf->len;
}

static inline bool
sl_buf_empty(const struct sl_buf *buf)
{
    return buf->len == 0;
}

/* Byte at offset off (must be < len). Fast when it is in the head segment. */
static inline unsigned char
sl_buf_byte(const struct sl_buf *buf, size_t off)
{
    const struct sl_seg *s = buf->head;

    while (off >= (size_t)(s->end - s->start)) {
        off -= (size_t)(s->end - s->start);
        s = s->next;
    }
    return s->start[off];
}

/* Pointer to the first contiguous bytes and their count (head segment). */
static inline const unsigned char *
sl_buf_head_data(const struct sl_buf *buf, size_t *n)
{
    if (buf->head == NULL) {
        *n = 0;
        return NULL;
    }
    *n = (size_t)(buf->head->end - buf->head->start);
    return buf->head->start;
}

#endif
