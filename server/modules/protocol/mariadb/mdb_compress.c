/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Compressed framing of the MariaDB protocol (see mdb_compress.h).
 *
 * Both directions stream over the chains' segments: zlib and zstd read
 * the input where it lies and write straight into the output chain's
 * tail block, so a payload is copied once, by the (de)compressor. The
 * (de)compression contexts are made once per connection and reset per
 * packet (a zlib deflate state is 256 KiB: not something to allocate per
 * write).
 */
#include <stdlib.h>
#include <string.h>

#include <zlib.h>
#include <zstd.h>

#include <sluice/buf.h>

#include "mdb_compress.h"

struct mdb_zstate {
    enum mdb_zalgo algo;
    int level;
    bool client_role;
    uint8_t seq;
    size_t max_pending;
    enum mdb_zerr err;
    bool deflate_ready;
    bool inflate_ready;
    z_stream def;
    z_stream inf;
    ZSTD_CCtx *cctx;
    ZSTD_DCtx *dctx;
    /* mdb_z_command: the next sequence number per command read (runs)
     * and per command awaiting its answer (answers); rings. */
    uint8_t runs[MDB_Z_RUNS];
    unsigned runs_head, runs_len;
    uint8_t answers[MDB_Z_RUNS];
    unsigned answers_head, answers_len;
};

static void
ring_push(uint8_t *ring, unsigned head, unsigned *len, uint8_t v)
{
    if (*len < MDB_Z_RUNS) {
        ring[(head + *len) % MDB_Z_RUNS] = v;
        (*len)++;
    }
}

static int
ring_pop(const uint8_t *ring, unsigned *head, unsigned *len)
{
    int v;

    if (*len == 0) {
        return -1;
    }
    v = ring[*head];
    *head = (*head + 1) % MDB_Z_RUNS;
    (*len)--;
    return v;
}

void
mdb_z_command(struct mdb_zstate *z, bool expects_reply)
{
    int v = ring_pop(z->runs, &z->runs_head, &z->runs_len);

    if (expects_reply && v >= 0) {
        ring_push(z->answers, z->answers_head, &z->answers_len, (uint8_t)v);
    }
}

void
mdb_z_answer_starts(struct mdb_zstate *z)
{
    int v = ring_pop(z->answers, &z->answers_head, &z->answers_len);

    if (v >= 0) {
        z->seq = (uint8_t)v;
    }
}

/* A compressed packet numbered seq was read. */
static void
note_run(struct mdb_zstate *z, uint8_t seq)
{
    if (z->client_role) {
        return;
    }
    if (seq == 0) {
        ring_push(z->runs, z->runs_head, &z->runs_len, 1);
    } else if (z->runs_len > 0) {
        z->runs[(z->runs_head + z->runs_len - 1) % MDB_Z_RUNS] =
            (uint8_t)(seq + 1);
    }
}

static uint32_t
get24(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16;
}

static void
put24(unsigned char *p, uint32_t v)
{
    p[0] = (unsigned char)v;
    p[1] = (unsigned char)(v >> 8);
    p[2] = (unsigned char)(v >> 16);
}

struct mdb_zstate *
mdb_z_new(enum mdb_zalgo algo, int level, bool client_role, uint8_t seq,
          size_t max_pending)
{
    struct mdb_zstate *z = calloc(1, sizeof(*z));

    if (z == NULL) {
        return NULL;
    }
    z->algo = algo;
    z->level = level;
    z->client_role = client_role;
    z->seq = seq;
    z->max_pending = max_pending;
    if (algo == MDB_Z_ZSTD) {
        z->cctx = ZSTD_createCCtx();
        z->dctx = ZSTD_createDCtx();
        if (z->cctx == NULL || z->dctx == NULL ||
            ZSTD_isError(ZSTD_CCtx_setParameter(z->cctx,
                                                ZSTD_c_compressionLevel,
                                                level)) ||
            /* A packet is at most 16 MiB: so is the window a frame may
             * ask the decoder to allocate. */
            ZSTD_isError(ZSTD_DCtx_setParameter(z->dctx,
                                                ZSTD_d_windowLogMax, 24))) {
            mdb_z_free(z);
            return NULL;
        }
    }
    return z;
}

void
mdb_z_free(struct mdb_zstate *z)
{
    if (z == NULL) {
        return;
    }
    if (z->deflate_ready) {
        deflateEnd(&z->def);
    }
    if (z->inflate_ready) {
        inflateEnd(&z->inf);
    }
    ZSTD_freeCCtx(z->cctx);
    ZSTD_freeDCtx(z->dctx);
    free(z);
}

enum mdb_zerr
mdb_z_error(const struct mdb_zstate *z)
{
    return z->err;
}

uint8_t
mdb_z_next_seq(const struct mdb_zstate *z)
{
    return z->seq;
}

/* ---- decoding ---- */

/* Walks the bytes [off, off + len) of a chain segment by segment. */
struct span {
    const struct sl_seg *seg;
    size_t skip;        /* bytes of seg before the span */
    size_t left;        /* bytes of the span not yet returned */
};

static void
span_init(struct span *s, const struct sl_buf *b, size_t off, size_t len)
{
    s->seg = b->head;
    while (s->seg != NULL &&
           off >= (size_t)(s->seg->end - s->seg->start)) {
        off -= (size_t)(s->seg->end - s->seg->start);
        s->seg = s->seg->next;
    }
    s->skip = off;
    s->left = len;
}

/* The next piece of the span (NULL at its end). */
static const unsigned char *
span_next(struct span *s, size_t *n)
{
    const unsigned char *p;
    size_t have;

    if (s->left == 0 || s->seg == NULL) {
        return NULL;
    }
    p = s->seg->start + s->skip;
    have = (size_t)(s->seg->end - s->seg->start) - s->skip;
    *n = have < s->left ? have : s->left;
    s->left -= *n;
    s->skip = 0;
    s->seg = s->seg->next;
    return p;
}

/* Inflate the clen bytes after raw's header into dst[ulen]: exactly one
 * zlib stream producing exactly ulen bytes. */
static bool
inflate_packet(struct mdb_zstate *z, const struct sl_buf *raw, size_t clen,
               unsigned char *dst, size_t ulen)
{
    struct span s;
    const unsigned char *p;
    size_t n;
    int rc = Z_OK;

    if (!z->inflate_ready) {
        memset(&z->inf, 0, sizeof(z->inf));
        if (inflateInit(&z->inf) != Z_OK) {
            z->err = MDB_ZERR_NOMEM;
            return false;
        }
        z->inflate_ready = true;
    } else if (inflateReset(&z->inf) != Z_OK) {
        z->err = MDB_ZERR_CORRUPT;
        return false;
    }
    z->inf.next_out = dst;
    z->inf.avail_out = (uInt)ulen;
    span_init(&s, raw, MDB_Z_HDR_LEN, clen);
    while ((p = span_next(&s, &n)) != NULL) {
        if (n == 0) {
            continue;
        }
        if (rc == Z_STREAM_END) {
            break;   /* bytes after the end of the stream */
        }
        z->inf.next_in = (unsigned char *)p;
        z->inf.avail_in = (uInt)n;
        rc = inflate(&z->inf, Z_NO_FLUSH);
        if (rc != Z_OK && rc != Z_STREAM_END) {
            break;   /* bad data, or more output than announced */
        }
        if (rc == Z_OK && z->inf.avail_in != 0) {
            rc = Z_BUF_ERROR;   /* output full, input left */
            break;
        }
    }
    if (rc != Z_STREAM_END || z->inf.avail_in != 0 || s.left != 0 ||
        z->inf.avail_out != 0) {
        z->err = MDB_ZERR_CORRUPT;
        return false;
    }
    return true;
}

/* The same for one zstd frame. */
static bool
zstd_packet(struct mdb_zstate *z, const struct sl_buf *raw, size_t clen,
            unsigned char *dst, size_t ulen)
{
    struct span s;
    const unsigned char *p;
    size_t n;
    size_t rc = 1;
    ZSTD_outBuffer out = {dst, ulen, 0};
    ZSTD_inBuffer in;

    ZSTD_DCtx_reset(z->dctx, ZSTD_reset_session_only);
    span_init(&s, raw, MDB_Z_HDR_LEN, clen);
    while ((p = span_next(&s, &n)) != NULL) {
        if (n == 0) {
            continue;
        }
        if (rc == 0) {
            break;   /* bytes after the frame */
        }
        in = (ZSTD_inBuffer){p, n, 0};
        do {
            rc = ZSTD_decompressStream(z->dctx, &out, &in);
            if (ZSTD_isError(rc)) {
                z->err = MDB_ZERR_CORRUPT;
                return false;
            }
        } while (rc != 0 && in.pos < in.size && out.pos < out.size);
        if (in.pos < in.size) {
            rc = 1;   /* output full or frame ended early: refused below */
            break;
        }
    }
    while (rc != 0 && s.left == 0 && out.pos < out.size) {
        size_t before = out.pos;

        in = (ZSTD_inBuffer){NULL, 0, 0};
        rc = ZSTD_decompressStream(z->dctx, &out, &in);
        if (ZSTD_isError(rc) || out.pos == before) {
            break;
        }
    }
    if (ZSTD_isError(rc) || rc != 0 || s.left != 0 || out.pos != ulen) {
        z->err = MDB_ZERR_CORRUPT;
        return false;
    }
    return true;
}

int
mdb_z_decode(struct mdb_zstate *z, struct sl_buf *raw, struct sl_buf *out)
{
    unsigned char hdr[MDB_Z_HDR_LEN];
    size_t clen, ulen, avail;
    unsigned char *dst;
    bool ok;

    if (z->err != MDB_ZERR_NONE) {
        return -1;
    }
    while (sl_buf_copy_out(raw, 0, MDB_Z_HDR_LEN, hdr) == MDB_Z_HDR_LEN) {
        clen = get24(hdr);
        ulen = get24(hdr + 4);
        if (sl_buf_len(raw) < MDB_Z_HDR_LEN + clen) {
            break;
        }
        if (z->max_pending != 0 &&
            sl_buf_len(out) + (ulen != 0 ? ulen : clen) > z->max_pending) {
            z->err = MDB_ZERR_TOO_BIG;
            return -1;
        }
        z->seq = (uint8_t)(hdr[3] + 1);
        note_run(z, hdr[3]);
        if (ulen == 0) {
            sl_buf_consume(raw, MDB_Z_HDR_LEN);
            if (clen > 0 && sl_buf_split(raw, clen, out) != 0) {
                z->err = MDB_ZERR_NOMEM;
                return -1;
            }
            continue;
        }
        if (clen == 0) {
            z->err = MDB_ZERR_CORRUPT;
            return -1;
        }
        dst = sl_buf_reserve(out, ulen, ulen, &avail);
        if (dst == NULL) {
            z->err = MDB_ZERR_NOMEM;
            return -1;
        }
        ok = z->algo == MDB_Z_ZSTD ? zstd_packet(z, raw, clen, dst, ulen)
                                   : inflate_packet(z, raw, clen, dst, ulen);
        if (!ok) {
            return -1;
        }
        sl_buf_commit(out, ulen);
        sl_buf_consume(raw, MDB_Z_HDR_LEN + clen);
    }
    return 0;
}

/* ---- encoding ---- */

/* Compress the first chunk bytes of in into dst[cap]: the compressed
 * length, or 0 when it does not fit (the chunk goes uncompressed). */
static size_t
deflate_chunk(struct mdb_zstate *z, const struct sl_buf *in, size_t chunk,
              unsigned char *dst, size_t cap)
{
    struct span s;
    const unsigned char *p;
    size_t n;
    int rc = Z_OK;

    if (!z->deflate_ready) {
        memset(&z->def, 0, sizeof(z->def));
        if (deflateInit(&z->def, z->level) != Z_OK) {
            return 0;
        }
        z->deflate_ready = true;
    } else if (deflateReset(&z->def) != Z_OK) {
        return 0;
    }
    z->def.next_out = dst;
    z->def.avail_out = (uInt)cap;
    span_init(&s, in, 0, chunk);
    while ((p = span_next(&s, &n)) != NULL) {
        if (n == 0) {
            continue;
        }
        z->def.next_in = (unsigned char *)p;
        z->def.avail_in = (uInt)n;
        rc = deflate(&z->def, s.left == 0 ? Z_FINISH : Z_NO_FLUSH);
        if (rc == Z_STREAM_ERROR || (rc == Z_OK && z->def.avail_out == 0)) {
            return 0;
        }
    }
    return rc == Z_STREAM_END ? cap - z->def.avail_out : 0;
}

static size_t
zstd_chunk(struct mdb_zstate *z, const struct sl_buf *in, size_t chunk,
           unsigned char *dst, size_t cap)
{
    struct span s;
    const unsigned char *p;
    size_t n;
    size_t rc = 1;
    ZSTD_outBuffer out = {dst, cap, 0};
    ZSTD_inBuffer src;
    ZSTD_EndDirective mode;

    ZSTD_CCtx_reset(z->cctx, ZSTD_reset_session_only);
    if (ZSTD_isError(ZSTD_CCtx_setPledgedSrcSize(z->cctx, chunk))) {
        return 0;
    }
    span_init(&s, in, 0, chunk);
    while ((p = span_next(&s, &n)) != NULL) {
        if (n == 0) {
            continue;
        }
        src = (ZSTD_inBuffer){p, n, 0};
        mode = s.left == 0 ? ZSTD_e_end : ZSTD_e_continue;
        do {
            rc = ZSTD_compressStream2(z->cctx, &out, &src, mode);
            if (ZSTD_isError(rc) || out.pos == out.size) {
                return 0;   /* no gain (or an error): send it as it is */
            }
        } while (mode == ZSTD_e_end ? rc != 0 : src.pos < src.size);
    }
    return rc == 0 ? out.pos : 0;
}

struct sl_buf *
mdb_z_encode(struct mdb_zstate *z, struct sl_buf *in)
{
    struct sl_buf *out = sl_buf_new();
    unsigned char *p;
    size_t chunk, clen, avail;

    if (in == NULL) {
        sl_buf_free(out);
        return NULL;
    }
    if (out == NULL) {
        sl_buf_free(in);
        return NULL;
    }
    /* A command (a logical packet numbered 0) restarts the sequence. */
    if (z->client_role && sl_buf_len(in) > 3 && sl_buf_byte(in, 3) == 0) {
        z->seq = 0;
    }
    while (sl_buf_len(in) > 0) {
        chunk = sl_buf_len(in);
        if (chunk > MDB_Z_MAX_PAYLOAD) {
            chunk = MDB_Z_MAX_PAYLOAD;
        }
        /* Room for the header and a payload smaller than the chunk:
         * anything longer is not worth sending compressed. */
        p = sl_buf_reserve(out, MDB_Z_HDR_LEN + chunk,
                           MDB_Z_HDR_LEN + chunk, &avail);
        if (p == NULL) {
            goto fail;
        }
        clen = 0;
        if (chunk >= MDB_Z_MIN_COMPRESS) {
            clen = z->algo == MDB_Z_ZSTD
                       ? zstd_chunk(z, in, chunk, p + MDB_Z_HDR_LEN,
                                    chunk - 1)
                       : deflate_chunk(z, in, chunk, p + MDB_Z_HDR_LEN,
                                       chunk - 1);
        }
        p[3] = z->seq++;
        if (clen > 0) {
            put24(p, (uint32_t)clen);
            put24(p + 4, (uint32_t)chunk);
            sl_buf_commit(out, MDB_Z_HDR_LEN + clen);
            sl_buf_consume(in, chunk);
        } else {
            /* Copied into the block reserved for it rather than moved:
             * a 16 MiB block must not travel with a 7-byte header. */
            put24(p, (uint32_t)chunk);
            put24(p + 4, 0);
            sl_buf_copy_out(in, 0, chunk, p + MDB_Z_HDR_LEN);
            sl_buf_commit(out, MDB_Z_HDR_LEN + chunk);
            sl_buf_consume(in, chunk);
        }
    }
    sl_buf_free(in);
    return out;

fail:
    sl_buf_free(in);
    sl_buf_free(out);
    return NULL;
}
