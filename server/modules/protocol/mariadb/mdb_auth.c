/* SPDX-License-Identifier: Apache-2.0 */
/*
 * mysql_native_password math and the account table (see mdb_parse.h).
 *
 * The server stores SHA1(SHA1(pw)) as "*HEX". A client proves it knows pw
 * by sending token = SHA1(pw) XOR SHA1(scramble || SHA1(SHA1(pw))). Knowing
 * the stored hash and the scramble we recover SHA1(pw) = token XOR
 * SHA1(scramble || stored) and accept when SHA1(recovered) == stored. The
 * recovered SHA1(pw) is what lets the proxy log in to every backend with
 * that backend's own scramble.
 *
 * Host matching follows MariaDB: `%` and `_` wildcards (backslash escapes),
 * IPv4 address/netmask, `localhost` for unix sockets and loopback
 * addresses; the table is sorted most specific host first so the first
 * match wins, as in the server. Host names other than localhost are never
 * resolved (no DNS on a worker): such accounts match only literally.
 */
#include <arpa/inet.h>
#include <ctype.h>
#include <openssl/crypto.h>
#include <openssl/rand.h>
#include <openssl/sha.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "mdb_parse.h"

void
mdb_sha1(const void *data, size_t len, uint8_t out[MDB_SHA1_LEN])
{
    SHA1(data, len, out);
}

int
mdb_make_scramble(uint8_t s[MDB_SCRAMBLE_LEN], mdb_rand_fn rand_fn)
{
    mdb_rand_fn fill = rand_fn != NULL ? rand_fn : RAND_bytes;

    if (fill(s, MDB_SCRAMBLE_LEN) != 1) {
        OPENSSL_cleanse(s, MDB_SCRAMBLE_LEN);
        return -1;
    }
    for (int i = 0; i < MDB_SCRAMBLE_LEN; i++) {
        s[i] = (uint8_t)(33 + s[i] % 94);
    }
    return 0;
}

/* SHA1(scramble || stored) */
static void
scramble_hash(const uint8_t scramble[MDB_SCRAMBLE_LEN],
              const uint8_t stored[MDB_SHA1_LEN], uint8_t out[MDB_SHA1_LEN])
{
    uint8_t buf[MDB_SCRAMBLE_LEN + MDB_SHA1_LEN];

    memcpy(buf, scramble, MDB_SCRAMBLE_LEN);
    memcpy(buf + MDB_SCRAMBLE_LEN, stored, MDB_SHA1_LEN);
    mdb_sha1(buf, sizeof(buf), out);
}

void
mdb_native_token(const uint8_t sha1pw[MDB_SHA1_LEN],
                 const uint8_t scramble[MDB_SCRAMBLE_LEN],
                 uint8_t token[MDB_SHA1_LEN])
{
    uint8_t stored[MDB_SHA1_LEN];
    uint8_t h[MDB_SHA1_LEN];

    mdb_sha1(sha1pw, MDB_SHA1_LEN, stored);
    scramble_hash(scramble, stored, h);
    for (int i = 0; i < MDB_SHA1_LEN; i++) {
        token[i] = sha1pw[i] ^ h[i];
    }
}

bool
mdb_native_check(const uint8_t *token, size_t token_len,
                 const uint8_t scramble[MDB_SCRAMBLE_LEN], bool has_pw,
                 const uint8_t stored[MDB_SHA1_LEN],
                 uint8_t sha1pw[MDB_SHA1_LEN])
{
    uint8_t h[MDB_SHA1_LEN];
    uint8_t check[MDB_SHA1_LEN];

    if (!has_pw) {
        return token_len == 0;
    }
    if (token_len != MDB_SHA1_LEN) {
        return false;
    }
    scramble_hash(scramble, stored, h);
    for (int i = 0; i < MDB_SHA1_LEN; i++) {
        sha1pw[i] = token[i] ^ h[i];
    }
    mdb_sha1(sha1pw, MDB_SHA1_LEN, check);
    return CRYPTO_memcmp(check, stored, MDB_SHA1_LEN) == 0;
}

bool
mdb_native_check_password(const uint8_t *pw, size_t pw_len, bool has_pw,
                          const uint8_t stored[MDB_SHA1_LEN],
                          uint8_t sha1pw[MDB_SHA1_LEN])
{
    uint8_t check[MDB_SHA1_LEN];

    if (!has_pw) {
        return pw_len == 0;
    }
    mdb_sha1(pw, pw_len, sha1pw);
    mdb_sha1(sha1pw, MDB_SHA1_LEN, check);
    return CRYPTO_memcmp(check, stored, MDB_SHA1_LEN) == 0;
}

static int
hexval(int c)
{
    if (c >= '0' && c <= '9') {
        return c - '0';
    }
    c = tolower(c);
    return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

int
mdb_parse_stored(const char *s, uint8_t stored[MDB_SHA1_LEN])
{
    int hi, lo;

    if (s == NULL || s[0] == '\0') {
        return 0;
    }
    if (s[0] != '*' || strlen(s) != 1 + 2 * MDB_SHA1_LEN) {
        return -1;
    }
    for (int i = 0; i < MDB_SHA1_LEN; i++) {
        hi = hexval((unsigned char)s[1 + 2 * i]);
        lo = hexval((unsigned char)s[2 + 2 * i]);
        if (hi < 0 || lo < 0) {
            return -1;
        }
        stored[i] = (uint8_t)(hi << 4 | lo);
    }
    return 1;
}

/* ---- host matching ---- */

/* SQL LIKE on host names: case-insensitive, % any run, _ one char,
 * backslash escapes the next char. Iterative with one backtrack point. */
static bool
wild_match(const char *pat, const char *str)
{
    const char *star_p = NULL;
    const char *star_s = NULL;

    while (*str != '\0') {
        if (*pat == '%') {
            star_p = ++pat;
            star_s = str;
            continue;
        }
        if (*pat == '\\' && pat[1] != '\0' &&
            tolower((unsigned char)pat[1]) == tolower((unsigned char)*str)) {
            pat += 2;
            str++;
            continue;
        }
        if (*pat != '\0' && *pat != '\\' &&
            (*pat == '_' ||
             tolower((unsigned char)*pat) == tolower((unsigned char)*str))) {
            pat++;
            str++;
            continue;
        }
        if (star_p == NULL) {
            return false;
        }
        pat = star_p;
        str = ++star_s;
    }
    while (*pat == '%') {
        pat++;
    }
    return *pat == '\0';
}

/* "a.b.c.d/m.m.m.m" against an IPv4 client. */
static bool
netmask_match(const char *pattern, const char *client)
{
    char addr[64];
    const char *slash = strchr(pattern, '/');
    struct in_addr net, mask, ip;
    size_t n;

    if (slash == NULL || (n = (size_t)(slash - pattern)) >= sizeof(addr)) {
        return false;
    }
    memcpy(addr, pattern, n);
    addr[n] = '\0';
    if (inet_pton(AF_INET, addr, &net) != 1 ||
        inet_pton(AF_INET, slash + 1, &mask) != 1 ||
        inet_pton(AF_INET, client, &ip) != 1) {
        return false;
    }
    return (ip.s_addr & mask.s_addr) == net.s_addr;
}

static bool
is_loopback(const char *client)
{
    return strcmp(client, "::1") == 0 || strncmp(client, "127.", 4) == 0;
}

bool
mdb_host_match(const char *pattern, const char *client, bool is_unix)
{
    if (is_unix || client == NULL) {
        client = "localhost";
    } else if (strncasecmp(client, "::ffff:", 7) == 0 &&
               strchr(client + 7, ':') == NULL) {
        client += 7;   /* IPv4-mapped IPv6 */
    }
    if (strcasecmp(pattern, "localhost") == 0) {
        return strcmp(client, "localhost") == 0 || is_loopback(client);
    }
    if (strchr(pattern, '/') != NULL) {
        return netmask_match(pattern, client);
    }
    return wild_match(pattern, client);
}

/* ---- the account table ---- */

/*
 * Specificity of a host pattern, lower first: exact names, then netmasks,
 * then wildcard patterns (longer literal prefix first), then `%`.
 */
static int
host_rank(const char *host)
{
    size_t prefix = strcspn(host, "%_");

    if (host[0] == '\0' || strcmp(host, "%") == 0) {
        return 3000;
    }
    if (host[prefix] == '\0') {
        return strchr(host, '/') != NULL ? 1000 : 0;
    }
    return 2000 + 999 - (int)(prefix > 999 ? 999 : prefix);
}

int
mdb_users_add(struct mdb_users *u, const char *user, const char *host,
              const char *auth, const char *plugin)
{
    struct mdb_account *a;
    int rc;

    if (u->n == u->cap) {
        size_t cap = u->cap ? u->cap * 2 : 64;
        struct mdb_account *v = realloc(u->v, cap * sizeof(*v));

        if (v == NULL) {
            return -1;
        }
        u->v = v;
        u->cap = cap;
    }
    a = &u->v[u->n];
    memset(a, 0, sizeof(*a));
    a->user = strdup(user != NULL ? user : "");
    a->host = strdup(host != NULL ? host : "");
    if (a->user == NULL || a->host == NULL) {
        free(a->user);
        free(a->host);
        return -1;
    }
    rc = mdb_parse_stored(auth, a->stored);
    a->has_pw = rc == 1;
    a->native = rc >= 0 &&
                (plugin == NULL || plugin[0] == '\0' ||
                 strcmp(plugin, MDB_NATIVE_PLUGIN) == 0);
    a->ed25519 = plugin != NULL && strcmp(plugin, "ed25519") == 0 &&
                 mdb_ed25519_parse_key(auth, a->ed_pk) == 0;
    if (plugin != NULL && strcmp(plugin, "pam") == 0 &&
        mdb_account_set_pam(a, auth) != 0) {
        free(a->user);
        free(a->host);
        return -1;
    }
    a->rank = host_rank(a->host);
    a->pw_changed = -1;
    a->pw_lifetime = -1;
    u->n++;
    return 0;
}

int
mdb_account_set_pam(struct mdb_account *a, const char *service)
{
    char *s = strdup(service != NULL && service[0] != '\0' ? service
                                                           : "mysql");

    if (s == NULL) {
        return -1;
    }
    free(a->pam_service);
    a->pam_service = s;
    a->pam = true;
    return 0;
}

/* A required name: NULL or "" means none required. */
static bool
name_ok(const char *required, const char *actual)
{
    return required == NULL || required[0] == '\0' ||
           (actual != NULL && strcmp(required, actual) == 0);
}

bool
mdb_account_tls_ok(const struct mdb_account *a, const struct mdb_peer *p)
{
    bool names;

    switch (a->ssl_type) {
    case MDB_SSL_NONE:
        return true;
    case MDB_SSL_ANY:
        return p->tls;
    case MDB_SSL_X509:
        return p->tls && p->cert_ok;
    default:
        names = (a->x509_issuer != NULL && a->x509_issuer[0] != '\0') ||
                (a->x509_subject != NULL && a->x509_subject[0] != '\0');
        return p->tls && name_ok(a->ssl_cipher, p->cipher) &&
               (!names || p->cert_ok) &&
               name_ok(a->x509_issuer, p->issuer) &&
               name_ok(a->x509_subject, p->subject);
    }
}

bool
mdb_account_pw_expired(const struct mdb_account *a, int32_t default_days,
                       int64_t now)
{
    int64_t days = a->pw_lifetime < 0 ? default_days : a->pw_lifetime;

    if (a->pw_changed == 0) {
        return true;
    }
    return a->pw_changed > 0 && days > 0 &&
           now - a->pw_changed >= days * 86400;
}

static int
account_cmp(const void *x, const void *y)
{
    const struct mdb_account *a = x;
    const struct mdb_account *b = y;
    int c;

    if (a->rank != b->rank) {
        return a->rank < b->rank ? -1 : 1;
    }
    /* Named users before anonymous ones, then a stable order. */
    if ((a->user[0] == '\0') != (b->user[0] == '\0')) {
        return a->user[0] == '\0' ? 1 : -1;
    }
    c = strcmp(a->host, b->host);
    return c != 0 ? c : strcmp(a->user, b->user);
}

void
mdb_users_sort(struct mdb_users *u)
{
    if (u->n > 1) {
        qsort(u->v, u->n, sizeof(u->v[0]), account_cmp);
    }
}

void
mdb_users_free(struct mdb_users *u)
{
    for (size_t i = 0; i < u->n; i++) {
        free(u->v[i].user);
        free(u->v[i].host);
        free(u->v[i].ssl_cipher);
        free(u->v[i].x509_issuer);
        free(u->v[i].x509_subject);
        free(u->v[i].plugins);
        free(u->v[i].pam_service);
    }
    free(u->v);
    memset(u, 0, sizeof(*u));
}

const struct mdb_account *
mdb_users_find(const struct mdb_users *u, const char *user,
               const char *client, bool is_unix)
{
    for (size_t i = 0; i < u->n; i++) {
        const struct mdb_account *a = &u->v[i];

        if (a->user[0] != '\0' && strcmp(a->user, user) == 0 &&
            mdb_host_match(a->host, client, is_unix)) {
            return a;
        }
    }
    return NULL;
}
