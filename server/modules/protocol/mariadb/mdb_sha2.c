/* SPDX-License-Identifier: Apache-2.0 */
/*
 * caching_sha2_password, the math only (see mdb_parse.h).
 *
 * Fast path: the client sends
 *   token = SHA256(pw) XOR SHA256(SHA256(SHA256(pw)) || nonce)
 * over the 20-byte scramble of the handshake. Knowing SHA256(pw) (cached
 * from an earlier full authentication) the check is recomputing it.
 *
 * Full authentication on a plain connection: the client encrypts
 * (pw NUL) XOR nonce (the nonce repeated) with the server's RSA public
 * key, OAEP padding (RSA_PKCS1_OAEP_PADDING, SHA-1, as MySQL and
 * libmariadb do), after fetching the key with a 0x02 request.
 *
 * The cache of SHA256(pw) the fast path is checked against lives here too
 * (pure data, so unit tests reach its eviction and invalidation).
 */
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/rsa.h>
#include <openssl/sha.h>
#include <stdlib.h>
#include <string.h>

#include "mdb_parse.h"

static void
sha256(const void *data, size_t len, uint8_t out[MDB_SHA256_LEN])
{
    SHA256(data, len, out);
}

void
mdb_sha2_token(const uint8_t sha256pw[MDB_SHA256_LEN], const uint8_t *nonce,
               size_t nonce_len, uint8_t token[MDB_SHA256_LEN])
{
    uint8_t buf[MDB_SHA256_LEN + 64];
    uint8_t h[MDB_SHA256_LEN];

    if (nonce_len > 64) {
        nonce_len = 64;
    }
    sha256(sha256pw, MDB_SHA256_LEN, buf);               /* SHA256(SHA256) */
    memcpy(buf + MDB_SHA256_LEN, nonce, nonce_len);
    sha256(buf, MDB_SHA256_LEN + nonce_len, h);
    for (int i = 0; i < MDB_SHA256_LEN; i++) {
        token[i] = sha256pw[i] ^ h[i];
    }
    OPENSSL_cleanse(h, sizeof(h));
}

bool
mdb_sha2_fast_check(const uint8_t *token, size_t token_len,
                    const uint8_t *nonce, size_t nonce_len,
                    const uint8_t sha256pw[MDB_SHA256_LEN])
{
    uint8_t want[MDB_SHA256_LEN];
    bool ok;

    if (token_len != MDB_SHA256_LEN) {
        return false;
    }
    mdb_sha2_token(sha256pw, nonce, nonce_len, want);
    ok = CRYPTO_memcmp(want, token, MDB_SHA256_LEN) == 0;
    OPENSSL_cleanse(want, sizeof(want));
    return ok;
}

void
mdb_sha256_password(const void *pw, size_t len,
                    uint8_t out[MDB_SHA256_LEN])
{
    sha256(pw, len, out);
}

/* ---- RSA ---- */

struct evp_pkey_st *
mdb_rsa_generate(int bits)
{
    EVP_PKEY_CTX *ctx = EVP_PKEY_CTX_new_id(EVP_PKEY_RSA, NULL);
    EVP_PKEY *key = NULL;

    if (ctx == NULL || EVP_PKEY_keygen_init(ctx) != 1 ||
        EVP_PKEY_CTX_set_rsa_keygen_bits(ctx, bits) != 1 ||
        EVP_PKEY_keygen(ctx, &key) != 1) {
        key = NULL;
    }
    EVP_PKEY_CTX_free(ctx);
    return key;
}

void
mdb_rsa_free(struct evp_pkey_st *key)
{
    EVP_PKEY_free(key);
}

size_t
mdb_rsa_public_pem(struct evp_pkey_st *key, char *out, size_t cap)
{
    BIO *b = BIO_new(BIO_s_mem());
    char *data;
    long n;
    size_t len = 0;

    if (b != NULL && PEM_write_bio_PUBKEY(b, key) == 1 &&
        (n = BIO_get_mem_data(b, &data)) > 0 && (size_t)n < cap) {
        memcpy(out, data, (size_t)n);
        out[n] = '\0';
        len = (size_t)n;
    }
    BIO_free(b);
    return len;
}

size_t
mdb_rsa_size(const struct evp_pkey_st *key)
{
    int n = key != NULL ? EVP_PKEY_get_size(key) : 0;

    return n > 0 ? (size_t)n : 0;
}

/* One OAEP operation (decrypt or encrypt) into out[*out_len]. */
static int
oaep(struct evp_pkey_st *key, bool decrypt, const uint8_t *in,
     size_t in_len, uint8_t *out, size_t *out_len)
{
    EVP_PKEY_CTX *ctx = EVP_PKEY_CTX_new(key, NULL);
    int ok;

    ok = ctx != NULL &&
         (decrypt ? EVP_PKEY_decrypt_init(ctx) : EVP_PKEY_encrypt_init(ctx))
             == 1 &&
         EVP_PKEY_CTX_set_rsa_padding(ctx, RSA_PKCS1_OAEP_PADDING) == 1 &&
         (decrypt ? EVP_PKEY_decrypt(ctx, out, out_len, in, in_len)
                  : EVP_PKEY_encrypt(ctx, out, out_len, in, in_len)) == 1;
    EVP_PKEY_CTX_free(ctx);
    return ok ? 0 : -1;
}

int
mdb_rsa_decrypt_password(struct evp_pkey_st *key, const uint8_t *in,
                         size_t in_len, const uint8_t *nonce,
                         size_t nonce_len, uint8_t *pw, size_t cap,
                         size_t *pw_len)
{
    uint8_t plain[1024];
    size_t n = sizeof(plain);
    int rc = -1;

    *pw_len = 0;
    if (key == NULL || nonce_len == 0 || in_len != mdb_rsa_size(key) ||
        in_len > sizeof(plain) ||
        oaep(key, true, in, in_len, plain, &n) != 0) {
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        plain[i] ^= nonce[i % nonce_len];
    }
    /* The password's NUL ends it (clients always send one). */
    if (n == 0 || plain[n - 1] != '\0' || n - 1 > cap) {
        goto out;
    }
    n--;
    if (memchr(plain, '\0', n) != NULL) {
        goto out;
    }
    memcpy(pw, plain, n);
    *pw_len = n;
    rc = 0;
out:
    OPENSSL_cleanse(plain, sizeof(plain));
    return rc;
}

size_t
mdb_rsa_encrypt_password(struct evp_pkey_st *key, const char *pw,
                         size_t pw_len, const uint8_t *nonce,
                         size_t nonce_len, uint8_t *out, size_t cap)
{
    uint8_t plain[512];
    size_t n = cap;

    if (key == NULL || nonce_len == 0 || pw_len + 1 > sizeof(plain) ||
        cap < mdb_rsa_size(key)) {
        return 0;
    }
    memcpy(plain, pw, pw_len);
    plain[pw_len] = '\0';
    for (size_t i = 0; i <= pw_len; i++) {
        plain[i] ^= nonce[i % nonce_len];
    }
    if (oaep(key, false, plain, pw_len + 1, out, &n) != 0) {
        n = 0;
    }
    OPENSSL_cleanse(plain, sizeof(plain));
    return n;
}

struct evp_pkey_st *
mdb_rsa_public_from_pem(const char *pem, size_t len)
{
    BIO *b = BIO_new_mem_buf(pem, (int)len);
    EVP_PKEY *key = b != NULL ? PEM_read_bio_PUBKEY(b, NULL, NULL, NULL)
                              : NULL;

    BIO_free(b);
    return key;
}

/* ---- the cache ---- */

int
mdb_sha2_cache_init(struct mdb_sha2_cache *c, size_t cap)
{
    memset(c, 0, sizeof(*c));
    c->v = calloc(cap > 0 ? cap : 1, sizeof(*c->v));
    if (c->v == NULL) {
        return -1;
    }
    c->cap = cap > 0 ? cap : 1;
    return 0;
}

/* Wipe entry i and fill its hole with the last one. */
static void
cache_drop(struct mdb_sha2_cache *c, size_t i)
{
    struct mdb_sha2_entry *e = &c->v[i];

    free(e->user);
    free(e->host);
    OPENSSL_cleanse(e, sizeof(*e));
    if (i != c->n - 1) {
        *e = c->v[c->n - 1];
        OPENSSL_cleanse(&c->v[c->n - 1], sizeof(*e));
    }
    c->n--;
}

void
mdb_sha2_cache_free(struct mdb_sha2_cache *c)
{
    while (c->n > 0) {
        cache_drop(c, c->n - 1);
    }
    free(c->v);
    memset(c, 0, sizeof(*c));
}

static bool
same_hash(const struct mdb_sha2_entry *e, const struct mdb_account *a)
{
    return a->has_pw &&
           CRYPTO_memcmp(e->stored, a->stored, MDB_SHA1_LEN) == 0;
}

const struct mdb_sha2_entry *
mdb_sha2_cache_find(struct mdb_sha2_cache *c, const struct mdb_account *a)
{
    for (size_t i = 0; i < c->n; i++) {
        struct mdb_sha2_entry *e = &c->v[i];

        if (strcmp(e->user, a->user) != 0 || strcmp(e->host, a->host) != 0) {
            continue;
        }
        if (!same_hash(e, a)) {
            cache_drop(c, i);
            return NULL;
        }
        e->used = ++c->tick;
        return e;
    }
    return NULL;
}

int
mdb_sha2_cache_put(struct mdb_sha2_cache *c, const struct mdb_account *a,
                   const uint8_t *pw, size_t pw_len)
{
    struct mdb_sha2_entry *e =
        (struct mdb_sha2_entry *)mdb_sha2_cache_find(c, a);
    size_t oldest = 0;

    if (e == NULL) {
        if (c->n == c->cap) {
            for (size_t i = 1; i < c->n; i++) {
                if (c->v[i].used < c->v[oldest].used) {
                    oldest = i;
                }
            }
            cache_drop(c, oldest);
        }
        e = &c->v[c->n];
        e->user = strdup(a->user);
        e->host = strdup(a->host);
        if (e->user == NULL || e->host == NULL) {
            free(e->user);
            free(e->host);
            OPENSSL_cleanse(e, sizeof(*e));
            return -1;
        }
        c->n++;
        e->used = ++c->tick;
    }
    memcpy(e->stored, a->stored, MDB_SHA1_LEN);
    mdb_sha256_password(pw, pw_len, e->sha256pw);
    mdb_sha1(pw, pw_len, e->sha1pw);
    return 0;
}

void
mdb_sha2_cache_sweep(struct mdb_sha2_cache *c, const struct mdb_users *u)
{
    size_t i = 0;

    /* Entries times accounts: the cache is bounded and loads are at
     * most one a second. */
    while (i < c->n) {
        const struct mdb_sha2_entry *e = &c->v[i];
        bool keep = false;

        for (size_t j = 0; j < u->n && !keep; j++) {
            const struct mdb_account *a = &u->v[j];

            keep = strcmp(a->user, e->user) == 0 &&
                   strcmp(a->host, e->host) == 0 && same_hash(e, a);
        }
        if (keep) {
            i++;
        } else {
            cache_drop(c, i);
        }
    }
}
