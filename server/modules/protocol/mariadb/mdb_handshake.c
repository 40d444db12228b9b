/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Handshake packets, both directions (see mdb_parse.h).
 *
 * Client side:   Handshake v10 (built)  ->  HandshakeResponse41 (parsed)
 *                COM_CHANGE_USER (parsed)
 * Backend side:  Handshake v10 (parsed) ->  HandshakeResponse41 (built)
 *                AuthSwitchRequest (parsed), COM_CHANGE_USER (built)
 *
 * Parsers walk a cursor (struct rd) whose every read checks the remaining
 * length, so truncated or hostile input ends in -1, never a read past the
 * payload.
 */
#include <string.h>

#include "mdb_compress.h"
#include "mdb_parse.h"

/* A bounds-checked reader over an untrusted payload. */
struct rd {
    const unsigned char *p;
    size_t left;
};

static bool
rd_skip(struct rd *r, size_t n)
{
    if (r->left < n) {
        return false;
    }
    r->p += n;
    r->left -= n;
    return true;
}

static bool
rd_bytes(struct rd *r, void *out, size_t n)
{
    if (r->left < n) {
        return false;
    }
    memcpy(out, r->p, n);
    return rd_skip(r, n);
}

static bool
rd_u16(struct rd *r, uint16_t *v)
{
    if (r->left < 2) {
        return false;
    }
    *v = (uint16_t)(r->p[0] | (r->p[1] << 8));
    return rd_skip(r, 2);
}

static bool
rd_u32(struct rd *r, uint32_t *v)
{
    if (r->left < 4) {
        return false;
    }
    *v = (uint32_t)r->p[0] | ((uint32_t)r->p[1] << 8) |
         ((uint32_t)r->p[2] << 16) | ((uint32_t)r->p[3] << 24);
    return rd_skip(r, 4);
}

/* A NUL-terminated string copied into out[cap]. With to_end, a string
 * running to the end of the payload without NUL is accepted too. */
static bool
rd_str(struct rd *r, char *out, size_t cap, bool to_end)
{
    const unsigned char *nul = memchr(r->p, '\0', r->left);
    size_t n;

    if (nul == NULL && !to_end) {
        return false;
    }
    n = nul != NULL ? (size_t)(nul - r->p) : r->left;
    if (n >= cap) {
        return false;
    }
    memcpy(out, r->p, n);
    out[n] = '\0';
    return rd_skip(r, nul != NULL ? n + 1 : n);
}

static bool
rd_lenenc(struct rd *r, uint64_t *v)
{
    size_t used = sl_mdb_get_lenenc(r->p, r->left, v);

    return used > 0 && rd_skip(r, used);
}

/* The auth response of a HandshakeResponse41 in whichever form caps say. */
static bool
rd_auth(struct rd *r, uint32_t caps, struct mdb_hello *h)
{
    uint64_t n;
    const unsigned char *nul;

    if (caps & SL_CAP_PLUGIN_AUTH_LENENC_DATA) {
        if (!rd_lenenc(r, &n)) {
            return false;
        }
    } else if (caps & SL_CAP_SECURE_CONNECTION) {
        if (r->left < 1) {
            return false;
        }
        n = r->p[0];
        rd_skip(r, 1);
    } else {
        nul = memchr(r->p, '\0', r->left);
        if (nul == NULL) {
            return false;
        }
        n = (uint64_t)(nul - r->p);
        if (n > MDB_AUTH_MAX || !rd_bytes(r, h->auth, n)) {
            return false;
        }
        h->auth_len = n;
        return rd_skip(r, 1);
    }
    if (n > MDB_AUTH_MAX || !rd_bytes(r, h->auth, n)) {
        return false;
    }
    h->auth_len = n;
    return true;
}

static bool
rd_attrs(struct rd *r, struct mdb_hello *h)
{
    uint64_t n;

    if (r->left == 0) {
        return true;
    }
    if (!rd_lenenc(r, &n) || n > r->left) {
        return false;
    }
    h->attrs = r->p;
    h->attrs_len = n;
    return rd_skip(r, n);
}

int
mdb_parse_hello(const unsigned char *p, size_t len, struct mdb_hello *h)
{
    struct rd r = {p, len};

    memset(h, 0, sizeof(*h));
    if (!rd_u32(&r, &h->caps) || !(h->caps & SL_CAP_PROTOCOL_41) ||
        !rd_u32(&r, &h->max_packet) || !rd_bytes(&r, &h->charset, 1) ||
        !rd_skip(&r, 19) || !rd_u32(&r, &h->ext_caps)) {
        return -1;
    }
    if (h->caps & SL_CAP_LONG_PASSWORD) {
        h->ext_caps = 0;   /* CLIENT_MYSQL: the bytes are filler */
    }
    if (r.left == 0 && (h->caps & SL_CAP_SSL)) {
        h->ssl_request = true;
        return 0;
    }
    if (!rd_str(&r, h->user, sizeof(h->user), false) ||
        !rd_auth(&r, h->caps, h)) {
        return -1;
    }
    /* Trailing fields are optional in practice: some clients stop early. */
    if ((h->caps & SL_CAP_CONNECT_WITH_DB) && r.left > 0 &&
        !rd_str(&r, h->db, sizeof(h->db), false)) {
        return -1;
    }
    if ((h->caps & SL_CAP_PLUGIN_AUTH) && r.left > 0 &&
        !rd_str(&r, h->plugin, sizeof(h->plugin),
                !(h->caps & SL_CAP_CONNECT_ATTRS))) {
        return -1;
    }
    if ((h->caps & SL_CAP_CONNECT_ATTRS) && !rd_attrs(&r, h)) {
        return -1;
    }
    if ((h->caps & MDB_CAP_ZSTD) && r.left > 0 &&
        !rd_bytes(&r, &h->zstd_level, 1)) {
        return -1;
    }
    return 0;
}

int
mdb_parse_change_user(const unsigned char *p, size_t len, uint32_t caps,
                      struct mdb_hello *h)
{
    struct rd r = {p, len};
    uint16_t cs;

    memset(h, 0, sizeof(*h));
    h->caps = caps;
    if (len < 1 || p[0] != SL_COM_CHANGE_USER || !rd_skip(&r, 1) ||
        !rd_str(&r, h->user, sizeof(h->user), false) ||
        !rd_auth(&r, caps & ~SL_CAP_PLUGIN_AUTH_LENENC_DATA, h)) {
        return -1;
    }
    if (r.left > 0 && !rd_str(&r, h->db, sizeof(h->db), true)) {
        return -1;
    }
    if (r.left >= 2 && rd_u16(&r, &cs)) {
        h->charset = (uint8_t)cs;
    }
    if ((caps & SL_CAP_PLUGIN_AUTH) && r.left > 0 &&
        !rd_str(&r, h->plugin, sizeof(h->plugin),
                !(caps & SL_CAP_CONNECT_ATTRS))) {
        return -1;
    }
    if ((caps & SL_CAP_CONNECT_ATTRS) && !rd_attrs(&r, h)) {
        return -1;
    }
    return 0;
}

bool
mdb_attrs_find(const unsigned char *attrs, size_t len, const char *key,
               const unsigned char **val, size_t *vlen)
{
    struct rd r = {attrs, len};
    size_t klen = strlen(key);
    uint64_t kn, vn;
    const unsigned char *k;

    while (r.left > 0) {
        if (!rd_lenenc(&r, &kn) || kn > r.left) {
            return false;
        }
        k = r.p;
        rd_skip(&r, kn);
        if (!rd_lenenc(&r, &vn) || vn > r.left) {
            return false;
        }
        if (kn == klen && memcmp(k, key, klen) == 0) {
            *val = r.p;
            *vlen = vn;
            return true;
        }
        rd_skip(&r, vn);
    }
    return false;
}

bool
mdb_attrs_put(unsigned char *out, size_t cap, size_t *off, const char *key,
              const void *val, size_t vlen)
{
    size_t klen = strlen(key);

    if (*off + 18 + klen + vlen > cap) {
        return false;
    }
    *off += sl_mdb_put_lenenc(out + *off, klen);
    memcpy(out + *off, key, klen);
    *off += klen;
    *off += sl_mdb_put_lenenc(out + *off, vlen);
    memcpy(out + *off, val, vlen);
    *off += vlen;
    return true;
}

/* ---- builders ---- */

/* A writer that stops (ok = false) instead of overflowing out[cap]. */
struct wr {
    unsigned char *p;
    size_t cap;
    size_t n;
    bool ok;
};

static void
wr_bytes(struct wr *w, const void *data, size_t len)
{
    if (!w->ok || w->n + len > w->cap) {
        w->ok = false;
        return;
    }
    if (len > 0) {
        memcpy(w->p + w->n, data, len);
    }
    w->n += len;
}

static void
wr_u8(struct wr *w, unsigned v)
{
    unsigned char b = (unsigned char)v;

    wr_bytes(w, &b, 1);
}

static void
wr_u16(struct wr *w, unsigned v)
{
    wr_u8(w, v & 0xff);
    wr_u8(w, (v >> 8) & 0xff);
}

static void
wr_u32(struct wr *w, uint32_t v)
{
    wr_u16(w, v & 0xffff);
    wr_u16(w, v >> 16);
}

static void
wr_str(struct wr *w, const char *s)
{
    wr_bytes(w, s, strlen(s) + 1);
}

static void
wr_lenenc(struct wr *w, uint64_t v)
{
    unsigned char b[9];

    wr_bytes(w, b, sl_mdb_put_lenenc(b, v));
}

size_t
mdb_build_handshake(unsigned char *out, size_t cap, const char *version,
                    uint32_t thread_id,
                    const uint8_t scramble[MDB_SCRAMBLE_LEN], uint32_t caps,
                    uint8_t charset)
{
    return mdb_build_handshake_ext(out, cap, version, thread_id, scramble,
                                   caps, 0, charset);
}

size_t
mdb_build_handshake_ext(unsigned char *out, size_t cap, const char *version,
                        uint32_t thread_id,
                        const uint8_t scramble[MDB_SCRAMBLE_LEN],
                        uint32_t caps, uint32_t ext_caps, uint8_t charset)
{
    static const unsigned char zero[6];
    struct wr w = {out, cap, 0, true};

    if (ext_caps != 0) {
        caps &= ~(uint32_t)SL_CAP_LONG_PASSWORD;   /* CLIENT_MYSQL */
    }
    wr_u8(&w, 10);
    wr_str(&w, version);
    wr_u32(&w, thread_id);
    wr_bytes(&w, scramble, 8);
    wr_u8(&w, 0);
    wr_u16(&w, caps & 0xffff);
    wr_u8(&w, charset);
    wr_u16(&w, SL_SERVER_STATUS_AUTOCOMMIT);
    wr_u16(&w, caps >> 16);
    wr_u8(&w, MDB_SCRAMBLE_LEN + 1);
    /* 6 reserved bytes + 4 bytes of MariaDB extended capabilities (never
     * MARIADB_CLIENT_CACHE_METADATA: see MDB_EXT_CAPS). */
    wr_bytes(&w, zero, 6);
    wr_u32(&w, ext_caps);
    wr_bytes(&w, scramble + 8, MDB_SCRAMBLE_LEN - 8);
    wr_u8(&w, 0);
    wr_str(&w, MDB_NATIVE_PLUGIN);
    return w.ok ? w.n : 0;
}

int
mdb_parse_server_hello(const unsigned char *p, size_t len,
                       struct mdb_server_hello *h)
{
    struct rd r = {p, len};
    uint16_t lo, hi = 0;
    uint8_t auth_len = 0;

    memset(h, 0, sizeof(*h));
    if (!rd_bytes(&r, &h->protocol, 1) || h->protocol != 10 ||
        !rd_str(&r, h->version, sizeof(h->version), false) ||
        !rd_u32(&r, &h->thread_id) || !rd_bytes(&r, h->scramble, 8) ||
        !rd_skip(&r, 1) || !rd_u16(&r, &lo)) {
        return -1;
    }
    h->caps = lo;
    if (r.left == 0) {
        return -1;   /* no second scramble part: a pre-4.1 server */
    }
    if (!rd_bytes(&r, &h->charset, 1) || !rd_u16(&r, &h->status) ||
        !rd_u16(&r, &hi) || !rd_bytes(&r, &auth_len, 1) ||
        !rd_skip(&r, 6) || !rd_u32(&r, &h->ext_caps)) {
        return -1;
    }
    h->caps |= (uint32_t)hi << 16;
    if (h->caps & SL_CAP_LONG_PASSWORD) {
        h->ext_caps = 0;   /* CLIENT_MYSQL: the bytes are filler */
    }
    if (!(h->caps & SL_CAP_SECURE_CONNECTION) ||
        !rd_bytes(&r, h->scramble + 8, MDB_SCRAMBLE_LEN - 8)) {
        return -1;
    }
    if (r.left > 0) {
        rd_skip(&r, 1);   /* NUL after the scramble */
    }
    if ((h->caps & SL_CAP_PLUGIN_AUTH) && r.left > 0 &&
        !rd_str(&r, h->plugin, sizeof(h->plugin), true)) {
        return -1;
    }
    return 0;
}

int
mdb_parse_auth_switch_data(const unsigned char *p, size_t len,
                           char plugin[MDB_PLUGIN_MAX], uint8_t *data,
                           size_t cap, size_t *data_len)
{
    struct rd r = {p, len};
    size_t n;

    if (len < 1 || p[0] != 0xfe || !rd_skip(&r, 1) ||
        !rd_str(&r, plugin, MDB_PLUGIN_MAX, true)) {
        return -1;
    }
    n = r.left;   /* as sent: a nonce may end in a zero byte */
    if (n > cap) {
        return -1;
    }
    memcpy(data, r.p, n);
    *data_len = n;
    return 0;
}

int
mdb_parse_auth_switch(const unsigned char *p, size_t len,
                      char plugin[MDB_PLUGIN_MAX],
                      uint8_t data[MDB_SCRAMBLE_LEN], size_t *data_len)
{
    struct rd r = {p, len};
    size_t n;

    if (len < 1 || p[0] != 0xfe || !rd_skip(&r, 1) ||
        !rd_str(&r, plugin, MDB_PLUGIN_MAX, true)) {
        return -1;
    }
    n = r.left;
    if (n > 0 && r.p[n - 1] == '\0') {
        n--;
    }
    if (n > MDB_SCRAMBLE_LEN) {
        n = MDB_SCRAMBLE_LEN;
    }
    memcpy(data, r.p, n);
    *data_len = n;
    return 0;
}

static void
wr_auth_and_tail(struct wr *w, const struct mdb_login *l, bool change_user)
{
    size_t tlen = l->token == NULL ? 0
                  : l->token_len != 0 ? l->token_len : MDB_SHA1_LEN;

    if (!change_user && (l->caps & SL_CAP_PLUGIN_AUTH_LENENC_DATA)) {
        wr_lenenc(w, tlen);
    } else {
        wr_u8(w, (unsigned)tlen);
    }
    wr_bytes(w, l->token, tlen);
    if (change_user) {
        wr_str(w, l->db);
        wr_u16(w, l->charset);
    } else if (l->caps & SL_CAP_CONNECT_WITH_DB) {
        wr_str(w, l->db);
    }
    if (l->caps & SL_CAP_PLUGIN_AUTH) {
        wr_str(w, l->plugin != NULL ? l->plugin : MDB_NATIVE_PLUGIN);
    }
    if (l->caps & SL_CAP_CONNECT_ATTRS) {
        wr_lenenc(w, l->attrs_len);
        wr_bytes(w, l->attrs, l->attrs_len);
    }
}

size_t
mdb_build_login(unsigned char *out, size_t cap, const struct mdb_login *l)
{
    static const unsigned char zero[19];
    struct wr w = {out, cap, 0, true};

    wr_u32(&w, l->ext_caps != 0 ? l->caps & ~(uint32_t)SL_CAP_LONG_PASSWORD
                                : l->caps);
    wr_u32(&w, 16 * 1024 * 1024);
    wr_u8(&w, l->charset);
    wr_bytes(&w, zero, sizeof(zero));
    wr_u32(&w, l->ext_caps);
    wr_str(&w, l->user);
    wr_auth_and_tail(&w, l, false);
    return w.ok ? w.n : 0;
}

size_t
mdb_build_change_user(unsigned char *out, size_t cap,
                      const struct mdb_login *l)
{
    struct wr w = {out, cap, 0, true};

    wr_u8(&w, SL_COM_CHANGE_USER);
    wr_str(&w, l->user);
    wr_auth_and_tail(&w, l, true);
    return w.ok ? w.n : 0;
}
