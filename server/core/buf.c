/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Buffer chains: segments (windows) over reference-counted blocks.
 *
 *   struct sl_buf { head, tail, len }
 *        head -> [seg: start..end of block A] -> [seg: block B] -> ... tail
 *
 * The chain caches its tail and total length, so appending never walks the
 * list. Splitting a segment makes two windows onto one block (the block's
 * reference count goes up); nothing on the data path copies payload bytes
 * except pullup across segments and append_data.
 *
 * Writing into a block is allowed only when the writer's segment is the
 * block's only user (refs == 1): then nobody can see the bytes after the
 * segment's end, so the free room there is ours.
 *
 * Segments and default-size blocks come from per-thread free lists, so the
 * hot path (read into a block, split a packet off, write, free) does not
 * call malloc once the caches are warm. A block may be released on another
 * thread than the one that allocated it; it then joins that thread's cache.
 *
 * Context: a chain belongs to one thread at a time; only the block
 * reference count is atomic.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "buf_int.h"

#define SEG_CACHE_MAX 4096
#define BLOCK_CACHE_MAX 256

/* Per-thread caches. A cached block stores the link in its data area. */
static __thread struct sl_seg *seg_cache;
static __thread unsigned seg_cached;
static __thread struct sl_block *block_cache;
static __thread unsigned block_cached;
static __thread uint64_t seg_visits;
/* Heap chain headers (struct sl_buf) travel with every packet between
 * modules; recycle them too. Linked through their head pointer. */
static __thread struct sl_buf *chain_cache;
static __thread unsigned chain_cached;

/* A block allocated by sl_buf_reserve() for `rsv_buf` and not committed
 * yet. Keeping it outside the chain avoids empty segments when a read
 * returns nothing. */
static __thread struct sl_block *rsv_block;
static __thread const struct sl_buf *rsv_buf;

uint64_t
sl__buf_seg_visits(void)
{
    return seg_visits;
}

static struct sl_seg *
seg_alloc(void)
{
    struct sl_seg *s = seg_cache;

    if (SL_LIKELY(s != NULL)) {
        seg_cache = s->next;
        seg_cached--;
    } else {
        s = malloc(sizeof(*s));
        if (s == NULL) {
            return NULL;
        }
    }
    s->next = NULL;
    return s;
}

static void
seg_release(struct sl_seg *s)
{
    if (seg_cached < SEG_CACHE_MAX) {
        s->next = seg_cache;
        seg_cache = s;
        seg_cached++;
    } else {
        free(s);
    }
}

static struct sl_block *
block_alloc(size_t size)
{
    struct sl_block *b;

    if (size <= SL_BUF_BLOCK_SIZE && block_cache != NULL) {
        b = block_cache;
        memcpy(&block_cache, b->data, sizeof(block_cache));
        block_cached--;
    } else {
        if (size < SL_BUF_BLOCK_SIZE) {
            size = SL_BUF_BLOCK_SIZE;
        }
        if (size > UINT32_MAX) {
            return NULL;
        }
        b = malloc(sizeof(*b) + size);
        if (b == NULL) {
            return NULL;
        }
        b->size = (uint32_t)size;
    }
    atomic_init(&b->refs, 1);
    return b;
}

static void
block_put(struct sl_block *b)
{
    if (b->size == SL_BUF_BLOCK_SIZE && block_cached < BLOCK_CACHE_MAX) {
        memcpy(b->data, &block_cache, sizeof(block_cache));
        block_cache = b;
        block_cached++;
    } else {
        free(b);
    }
}

static void
block_unref(struct sl_block *b)
{
    if (atomic_fetch_sub_explicit(&b->refs, 1, memory_order_acq_rel) == 1) {
        block_put(b);
    }
}

void
sl__buf_thread_cleanup(void)
{
    struct sl_block *b;
    struct sl_seg *s;
    struct sl_buf *c;

    while ((c = chain_cache) != NULL) {
        chain_cache = (struct sl_buf *)c->head;
        free(c);
    }
    chain_cached = 0;
    while ((s = seg_cache) != NULL) {
        seg_cache = s->next;
        free(s);
    }
    seg_cached = 0;
    while ((b = block_cache) != NULL) {
        memcpy(&block_cache, b->data, sizeof(block_cache));
        free(b);
    }
    block_cached = 0;
    free(rsv_block);
    rsv_block = NULL;
    rsv_buf = NULL;
}

static inline size_t
seg_len(const struct sl_seg *s)
{
    return (size_t)(s->end - s->start);
}

/* Link s (window already set) at the tail. O(1). */
static inline void
link_tail(struct sl_buf *buf, struct sl_seg *s)
{
    s->next = NULL;
    if (buf->tail != NULL) {
        buf->tail->next = s;
    } else {
        buf->head = s;
    }
    buf->tail = s;
    buf->len += seg_len(s);
}

/* Free room after the tail segment that we may write into, or 0. */
static inline size_t
tail_room(const struct sl_buf *buf)
{
    const struct sl_seg *t = buf->tail;

    if (t == NULL ||
        atomic_load_explicit(&t->block->refs, memory_order_acquire) != 1) {
        return 0;
    }
    return (size_t)(t->block->data + t->block->size - t->end);
}

struct sl_buf *
sl_buf_new(void)
{
    struct sl_buf *buf = chain_cache;

    if (buf == NULL) {
        return calloc(1, sizeof(struct sl_buf));
    }
    chain_cache = (struct sl_buf *)buf->head;
    chain_cached--;
    buf->head = NULL;
    return buf;
}

struct sl_buf *
sl_buf_from(const void *data, size_t len)
{
    struct sl_buf *buf = sl_buf_new();

    if (buf != NULL && sl_buf_append_data(buf, data, len) != 0) {
        sl_buf_free(buf);
        return NULL;
    }
    return buf;
}

void
sl_buf_reset(struct sl_buf *buf)
{
    struct sl_seg *s = buf->head;
    struct sl_seg *next;

    while (s != NULL) {
        next = s->next;
        block_unref(s->block);
        seg_release(s);
        s = next;
    }
    buf->head = buf->tail = NULL;
    buf->len = 0;
}

void
sl_buf_free(struct sl_buf *buf)
{
    if (buf == NULL) {
        return;
    }
    sl_buf_reset(buf);
    if (chain_cached < SEG_CACHE_MAX) {
        buf->head = (struct sl_seg *)chain_cache;
        chain_cache = buf;
        chain_cached++;
    } else {
        free(buf);
    }
}

unsigned char *
sl_buf_reserve(struct sl_buf *buf, size_t min, size_t hint, size_t *avail)
{
    size_t room = tail_room(buf);
    size_t want = hint > min ? hint : min;

    if (min == 0) {
        min = 1;
    }
    if (room >= min) {
        *avail = room;
        rsv_buf = NULL;
        return buf->tail->end;
    }
    if (rsv_block != NULL && rsv_block->size < want) {
        free(rsv_block);
        rsv_block = NULL;
    }
    if (rsv_block == NULL) {
        rsv_block = block_alloc(want);
        if (rsv_block == NULL) {
            return NULL;
        }
    }
    rsv_buf = buf;
    *avail = rsv_block->size;
    return rsv_block->data;
}

void
sl_buf_commit(struct sl_buf *buf, size_t n)
{
    struct sl_seg *s;

    if (n == 0) {
        return;   /* a reserved block stays cached for the next reserve */
    }
    if (rsv_buf != buf || rsv_block == NULL) {
        buf->tail->end += n;
        buf->len += n;
        return;
    }
    s = seg_alloc();
    if (s == NULL) {
        abort();   /* the bytes are already read; cannot report it */
    }
    s->block = rsv_block;
    s->start = rsv_block->data;
    s->end = s->start + n;
    rsv_block = NULL;
    rsv_buf = NULL;
    link_tail(buf, s);
}

int
sl_buf_append_data(struct sl_buf *buf, const void *data, size_t len)
{
    const unsigned char *p = data;
    size_t room = tail_room(buf);
    size_t n;
    struct sl_seg *s;

    if (room > 0 && len > 0) {
        n = room < len ? room : len;
        memcpy(buf->tail->end, p, n);
        buf->tail->end += n;
        buf->len += n;
        p += n;
        len -= n;
    }
    while (len > 0) {
        s = seg_alloc();
        if (s == NULL) {
            return -ENOMEM;
        }
        s->block = block_alloc(len);
        if (s->block == NULL) {
            seg_release(s);
            return -ENOMEM;
        }
        n = s->block->size < len ? s->block->size : len;
        memcpy(s->block->data, p, n);
        s->start = s->block->data;
        s->end = s->start + n;
        link_tail(buf, s);
        p += n;
        len -= n;
    }
    return 0;
}

void
sl_buf_append(struct sl_buf *buf, struct sl_buf *other)
{
    if (other->head == NULL) {
        return;
    }
    if (buf->tail != NULL) {
        buf->tail->next = other->head;
    } else {
        buf->head = other->head;
    }
    buf->tail = other->tail;
    buf->len += other->len;
    other->head = other->tail = NULL;
    other->len = 0;
}

void
sl_buf_consume(struct sl_buf *buf, size_t n)
{
    struct sl_seg *s;

    if (n >= buf->len) {
        sl_buf_reset(buf);
        return;
    }
    buf->len -= n;
    while (n > 0) {
        s = buf->head;
        seg_visits++;
        if (n < seg_len(s)) {
            s->start += n;
            return;
        }
        n -= seg_len(s);
        buf->head = s->next;
        block_unref(s->block);
        seg_release(s);
    }
    /* n landed exactly on a boundary; buf->len > 0 so head is not NULL */
}

int
sl_buf_split(struct sl_buf *buf, size_t n, struct sl_buf *out)
{
    struct sl_seg *s;
    struct sl_seg *part;

    if (n >= buf->len) {
        sl_buf_append(out, buf);
        return 0;
    }
    while (n > 0) {
        s = buf->head;
        seg_visits++;
        if (n < seg_len(s)) {
            part = seg_alloc();
            if (part == NULL) {
                return -ENOMEM;
            }
            atomic_fetch_add_explicit(&s->block->refs, 1,
                                      memory_order_relaxed);
            part->block = s->block;
            part->start = s->start;
            part->end = s->start + n;
            s->start += n;
            buf->len -= n;
            link_tail(out, part);
            return 0;
        }
        n -= seg_len(s);
        buf->head = s->next;
        buf->len -= seg_len(s);
        link_tail(out, s);
    }
    return 0;
}

size_t
sl_buf_copy_out(const struct sl_buf *buf, size_t off, size_t n, void *dst)
{
    const struct sl_seg *s = buf->head;
    unsigned char *d = dst;
    size_t done = 0;
    size_t take;

    while (s != NULL && off >= seg_len(s)) {
        seg_visits++;
        off -= seg_len(s);
        s = s->next;
    }
    while (s != NULL && done < n) {
        seg_visits++;
        take = seg_len(s) - off;
        if (take > n - done) {
            take = n - done;
        }
        memcpy(d + done, s->start + off, take);
        done += take;
        off = 0;
        s = s->next;
    }
    return done;
}

unsigned char *
sl_buf_pullup(struct sl_buf *buf, size_t n)
{
    struct sl_seg *s;

    if (n > buf->len) {
        return NULL;
    }
    if (n == 0 || seg_len(buf->head) >= n) {
        return buf->head != NULL ? buf->head->start : NULL;
    }
    s = seg_alloc();
    if (s == NULL) {
        return NULL;
    }
    s->block = block_alloc(n);
    if (s->block == NULL) {
        seg_release(s);
        return NULL;
    }
    sl_buf_copy_out(buf, 0, n, s->block->data);
    s->start = s->block->data;
    s->end = s->start + n;
    sl_buf_consume(buf, n);
    s->next = buf->head;
    buf->head = s;
    if (buf->tail == NULL) {
        buf->tail = s;
    }
    buf->len += n;
    return s->start;
}

int
sl_buf_clone(const struct sl_buf *buf, struct sl_buf *out)
{
    struct sl_buf tmp = {0};
    const struct sl_seg *s;
    struct sl_seg *c;

    for (s = buf->head; s != NULL; s = s->next) {
        seg_visits++;
        c = seg_alloc();
        if (c == NULL) {
            sl_buf_reset(&tmp);
            return -ENOMEM;
        }
        atomic_fetch_add_explicit(&s->block->refs, 1, memory_order_relaxed);
        c->block = s->block;
        c->start = s->start;
        c->end = s->end;
        link_tail(&tmp, c);
    }
    sl_buf_append(out, &tmp);
    return 0;
}

struct sl_buf *
sl_buf_clone_new(const struct sl_buf *buf)
{
    struct sl_buf *out = sl_buf_new();

    if (out != NULL && sl_buf_clone(buf, out) != 0) {
        sl_buf_free(out);
        return NULL;
    }
    return out;
}

struct sl_buf *
sl_buf_flatten_new(const struct sl_buf *buf)
{
    struct sl_buf *out = sl_buf_new();
    struct sl_seg *s;

    if (out == NULL || buf->len == 0) {
        return out;
    }
    s = seg_alloc();
    if (s == NULL) {
        goto out_free;
    }
    s->block = block_alloc(buf->len);
    if (s->block == NULL) {
        seg_release(s);
        goto out_free;
    }
    sl_buf_copy_out(buf, 0, buf->len, s->block->data);
    s->start = s->block->data;
    s->end = s->start + buf->len;
    link_tail(out, s);
    return out;

out_free:
    free(out);
    return NULL;
}
