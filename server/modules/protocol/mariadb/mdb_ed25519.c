/* SPDX-License-Identifier: Apache-2.0 */
/*
 * MariaDB's ed25519 authentication plugin, the math only (see mdb_parse.h).
 *
 * The server stores the account's public key as base64 without padding
 * (43 characters for 32 bytes). The client signs the server's 32-byte
 * scramble with pure Ed25519; verifying that is standard Ed25519, done with
 * OpenSSL.
 *
 * Signing is not standard: MariaDB uses the 64 bytes of SHA-512(password)
 * directly as the expanded secret key (RFC 8032 hashes a 32-byte seed to
 * get them). The first half, clamped, is the scalar a (A = a*B is the
 * public key); the second half is the nonce prefix. OpenSSL only signs
 * from a seed, so the signer uses libsodium's group and scalar primitives:
 *   r = SHA-512(prefix || M) mod L,  R = r*B,
 *   k = SHA-512(R || A || M) mod L,  S = r + k*a mod L,
 * and the signature is R || S. Whatever it signs, OpenSSL's verifier
 * accepts it with the key the server stored (unit-tested).
 */
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/sha.h>
#include <sodium.h>
#include <string.h>

#include "mdb_parse.h"

int
mdb_ed25519_parse_key(const char *s, uint8_t pk[MDB_ED25519_KEY_LEN])
{
    /* 43 base64 characters, no padding: add it back for the decoder */
    char in[45];
    unsigned char out[33];

    if (s == NULL || strlen(s) != 43) {
        return -1;
    }
    for (size_t i = 0; i < 43; i++) {
        unsigned char c = (unsigned char)s[i];
        if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') ||
              (c >= '0' && c <= '9') || c == '+' || c == '/')) {
            return -1;
        }
    }
    memcpy(in, s, 43);
    in[43] = '=';
    in[44] = '\0';
    /* EVP_DecodeBlock returns 33 for 44 characters (padding counted) */
    if (EVP_DecodeBlock(out, (const unsigned char *)in, 44) != 33) {
        return -1;
    }
    memcpy(pk, out, MDB_ED25519_KEY_LEN);
    return 0;
}

bool
mdb_ed25519_verify(const uint8_t pk[MDB_ED25519_KEY_LEN],
                   const uint8_t *msg, size_t msg_len,
                   const uint8_t *sig, size_t sig_len)
{
    EVP_PKEY *key;
    EVP_MD_CTX *ctx;
    bool ok = false;

    if (sig_len != MDB_ED25519_SIG_LEN) {
        return false;
    }
    key = EVP_PKEY_new_raw_public_key(EVP_PKEY_ED25519, NULL, pk,
                                      MDB_ED25519_KEY_LEN);
    if (key == NULL) {
        return false;
    }
    ctx = EVP_MD_CTX_new();
    if (ctx != NULL &&
        EVP_DigestVerifyInit(ctx, NULL, NULL, NULL, key) == 1 &&
        EVP_DigestVerify(ctx, sig, sig_len, msg, msg_len) == 1) {
        ok = true;
    }
    EVP_MD_CTX_free(ctx);
    EVP_PKEY_free(key);
    return ok;
}

int
mdb_ed25519_hash_password(const char *pw, size_t pw_len,
                          uint8_t hpw[MDB_ED25519_HASH_LEN])
{
    return SHA512((const unsigned char *)pw, pw_len, hpw) != NULL ? 0 : -1;
}

/* SHA-512(password), first half clamped as RFC 8032 does: the scalar a
 * (reduced mod L) and the nonce prefix. */
static int
expand(const uint8_t hpw[MDB_ED25519_HASH_LEN], uint8_t a[32],
       uint8_t prefix[32])
{
    uint8_t h[64];
    uint8_t wide[64] = {0};

    if (sodium_init() < 0) {
        return -1;
    }
    memcpy(h, hpw, sizeof(h));
    h[0] &= 248;
    h[31] &= 63;
    h[31] |= 64;
    memcpy(wide, h, 32);
    crypto_core_ed25519_scalar_reduce(a, wide);
    memcpy(prefix, h + 32, 32);
    OPENSSL_cleanse(h, sizeof(h));
    OPENSSL_cleanse(wide, sizeof(wide));
    return 0;
}

int
mdb_ed25519_public_key(const char *pw, size_t pw_len,
                       uint8_t pk[MDB_ED25519_KEY_LEN])
{
    uint8_t a[32], prefix[32], hpw[MDB_ED25519_HASH_LEN];
    int rc = -1;

    if (mdb_ed25519_hash_password(pw, pw_len, hpw) == 0 &&
        expand(hpw, a, prefix) == 0 &&
        crypto_scalarmult_ed25519_base_noclamp(pk, a) == 0) {
        rc = 0;
    }
    OPENSSL_cleanse(a, sizeof(a));
    OPENSSL_cleanse(prefix, sizeof(prefix));
    OPENSSL_cleanse(hpw, sizeof(hpw));
    return rc;
}

/* SHA-512(p1 || p2 || p3), any part may be empty; 0 or -1 */
static int
sha512_3(const void *p1, size_t n1, const void *p2, size_t n2,
         const void *p3, size_t n3, uint8_t out[64])
{
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    int ok = ctx != NULL &&
             EVP_DigestInit_ex(ctx, EVP_sha512(), NULL) == 1 &&
             EVP_DigestUpdate(ctx, p1, n1) == 1 &&
             EVP_DigestUpdate(ctx, p2, n2) == 1 &&
             EVP_DigestUpdate(ctx, p3, n3) == 1 &&
             EVP_DigestFinal_ex(ctx, out, NULL) == 1;

    EVP_MD_CTX_free(ctx);
    return ok ? 0 : -1;
}

int
mdb_ed25519_sign(const char *pw, size_t pw_len, const uint8_t *msg,
                 size_t msg_len, uint8_t sig[MDB_ED25519_SIG_LEN])
{
    uint8_t hpw[MDB_ED25519_HASH_LEN];
    int rc = mdb_ed25519_hash_password(pw, pw_len, hpw);

    if (rc == 0) {
        rc = mdb_ed25519_sign_hash(hpw, msg, msg_len, sig);
    }
    OPENSSL_cleanse(hpw, sizeof(hpw));
    return rc;
}

int
mdb_ed25519_sign_hash(const uint8_t hpw[MDB_ED25519_HASH_LEN],
                      const uint8_t *msg, size_t msg_len,
                      uint8_t sig[MDB_ED25519_SIG_LEN])
{
    uint8_t a[32], prefix[32], A[32], r[32], k[32], ka[32];
    uint8_t h[64];
    int rc = -1;

    if (expand(hpw, a, prefix) != 0 ||
        crypto_scalarmult_ed25519_base_noclamp(A, a) != 0) {
        goto out;
    }
    /* r = SHA-512(prefix || M) mod L; R = r*B */
    if (sha512_3(prefix, sizeof(prefix), msg, msg_len, "", 0, h) != 0) {
        goto out;
    }
    crypto_core_ed25519_scalar_reduce(r, h);
    if (crypto_scalarmult_ed25519_base_noclamp(sig, r) != 0) {
        goto out;
    }
    /* k = SHA-512(R || A || M) mod L; S = r + k*a mod L */
    if (sha512_3(sig, 32, A, sizeof(A), msg, msg_len, h) != 0) {
        goto out;
    }
    crypto_core_ed25519_scalar_reduce(k, h);
    crypto_core_ed25519_scalar_mul(ka, k, a);
    crypto_core_ed25519_scalar_add(sig + 32, r, ka);
    rc = 0;
out:
    OPENSSL_cleanse(a, sizeof(a));
    OPENSSL_cleanse(prefix, sizeof(prefix));
    OPENSSL_cleanse(r, sizeof(r));
    OPENSSL_cleanse(ka, sizeof(ka));
    OPENSSL_cleanse(h, sizeof(h));
    return rc;
}
