/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Pure MariaDB protocol code of the protocol module (static library
 * sl_mariadb_parse): handshake packets of both sides, the
 * mysql_native_password token math, the account table with MariaDB's host
 * matching, COM_CHANGE_USER decoding. The reply tracker is in
 * mdb_reply.h.
 *
 * Nothing here does I/O, logs or touches a DCB, so unit tests and fuzz
 * targets link it directly. Every parser takes untrusted bytes, checks
 * every length against the input and returns an error instead of reading
 * past the end.
 *
 * Context: pure functions, any thread; struct mdb_users is read-only once
 * built (mdb_users_sort), so several threads may search it.
 */
#ifndef MDB_PARSE_H
#define MDB_PARSE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <sluice/mariadb.h>

#define MDB_SCRAMBLE_LEN 20
#define MDB_SHA1_LEN 20
#define MDB_USER_MAX 385      /* 128 chars of utf8mb3 + NUL */
#define MDB_DB_MAX 193        /* 64 chars of utf8mb3 + NUL */
#define MDB_PLUGIN_MAX 65
#define MDB_AUTH_MAX 255
#define MDB_NATIVE_PLUGIN "mysql_native_password"
/* The client side of MariaDB's ed25519 plugin, as an AuthSwitchRequest
 * names it. */
#define MDB_ED25519_CLIENT_PLUGIN "client_ed25519"
/* MariaDB's dialog client plugin (auth_pam) and its question types. */
#define MDB_DIALOG_PLUGIN "dialog"
#define MDB_DIALOG_QUESTION 2   /* the answer is echoed */
#define MDB_DIALOG_PASSWORD 4   /* a password: not echoed */
#define MDB_CLEAR_PLUGIN "mysql_clear_password"
/* Longest answer to one PAM prompt, and room for all of a login's. */
#define MDB_PAM_ANSWER_MAX 512
#define MDB_PAM_ANSWERS_MAX 2048
/* Room for an account's plugin names, comma-separated (auth_or). */
#define MDB_PLUGINS_MAX 256

/* The capabilities the proxy offers clients (see docs/design.md).
 * CAN_HANDLE_EXPIRED_PASSWORDS passes on to the servers, which then log
 * an expired account in to their sandbox mode as they would directly. */
#define MDB_SERVER_CAPS                                                        \
    (SL_CAP_LONG_PASSWORD | SL_CAP_FOUND_ROWS | SL_CAP_LONG_FLAG |             \
     SL_CAP_CONNECT_WITH_DB | SL_CAP_LOCAL_FILES | SL_CAP_IGNORE_SPACE |       \
     SL_CAP_PROTOCOL_41 | SL_CAP_INTERACTIVE | SL_CAP_TRANSACTIONS |           \
     SL_CAP_SECURE_CONNECTION | SL_CAP_MULTI_STATEMENTS |                      \
     SL_CAP_MULTI_RESULTS | SL_CAP_PS_MULTI_RESULTS | SL_CAP_PLUGIN_AUTH |     \
     SL_CAP_CONNECT_ATTRS | SL_CAP_PLUGIN_AUTH_LENENC_DATA |                   \
     SL_CAP_CAN_HANDLE_EXPIRED_PASSWORDS | SL_CAP_SESSION_TRACK |              \
     SL_CAP_DEPRECATE_EOF)

/* MariaDB extended capabilities (the upper 32 bits of MariaDB's 64-bit
 * capability word, sent in the handshakes' reserved bytes when
 * CLIENT_MYSQL, bit 0, is clear). */
#define MDB_EXT_PROGRESS (1u << 0)
#define MDB_EXT_COM_MULTI (1u << 1)
#define MDB_EXT_STMT_BULK_OPERATIONS (1u << 2)
#define MDB_EXT_EXTENDED_METADATA (1u << 3)
#define MDB_EXT_CACHE_METADATA (1u << 4)
/* The ones Sluice passes through (see docs/design.md for why not the
 * others). */
#define MDB_EXT_CAPS MDB_EXT_EXTENDED_METADATA

/* ---- handshake ---- */

/* Build a Handshake v10 payload into out[cap]; returns its length or 0 if
 * cap is too small. The scramble is 20 bytes; MariaDB extended
 * capabilities are sent as zero. */
size_t mdb_build_handshake(unsigned char *out, size_t cap,
                           const char *version, uint32_t thread_id,
                           const uint8_t scramble[MDB_SCRAMBLE_LEN],
                           uint32_t caps, uint8_t charset);
/* The same with MariaDB extended capabilities ext_caps: when non-zero,
 * CLIENT_MYSQL (SL_CAP_LONG_PASSWORD) is cleared, as a MariaDB server
 * does, so that clients read them. */
size_t mdb_build_handshake_ext(unsigned char *out, size_t cap,
                               const char *version, uint32_t thread_id,
                               const uint8_t scramble[MDB_SCRAMBLE_LEN],
                               uint32_t caps, uint32_t ext_caps,
                               uint8_t charset);

/* A client's HandshakeResponse41 (or SSLRequest), decoded. Strings are
 * NUL-terminated copies; attrs points into the parsed payload. */
struct mdb_hello {
    uint32_t caps;
    uint32_t ext_caps;                /* MariaDB's, 0 unless !CLIENT_MYSQL */
    uint32_t max_packet;
    uint8_t charset;
    bool ssl_request;                 /* 32-byte SSLRequest with CLIENT_SSL */
    char user[MDB_USER_MAX];
    uint8_t auth[MDB_AUTH_MAX];
    size_t auth_len;
    char db[MDB_DB_MAX];
    char plugin[MDB_PLUGIN_MAX];
    const unsigned char *attrs;       /* connect attrs (pairs), or NULL */
    size_t attrs_len;
    uint8_t zstd_level;               /* with MDB_CAP_ZSTD (mdb_compress.h);
                                       * 0 if the client sent none */
};

/* 0 on success, -1 on malformed or truncated input. */
int mdb_parse_hello(const unsigned char *p, size_t len, struct mdb_hello *h);

/* Find a connect attribute by key in an attrs block (lenenc key/value
 * pairs). true and *val, *vlen set when found. */
bool mdb_attrs_find(const unsigned char *attrs, size_t len, const char *key,
                    const unsigned char **val, size_t *vlen);

/* The server's Handshake v10 as the backend side needs it. */
struct mdb_server_hello {
    uint8_t protocol;
    char version[64];
    uint32_t thread_id;
    uint8_t scramble[MDB_SCRAMBLE_LEN];
    uint32_t caps;
    uint32_t ext_caps;                /* MariaDB's, 0 unless !CLIENT_MYSQL */
    uint8_t charset;
    uint16_t status;
    char plugin[MDB_PLUGIN_MAX];
};

/* 0 on success, -1 on malformed input. */
int mdb_parse_server_hello(const unsigned char *p, size_t len,
                           struct mdb_server_hello *h);

/* AuthSwitchRequest (0xFE, plugin NUL, data): 0 on success, -1 if
 * malformed. data is copied (at most 20 bytes, trailing NUL dropped). */
int mdb_parse_auth_switch(const unsigned char *p, size_t len,
                          char plugin[MDB_PLUGIN_MAX],
                          uint8_t data[MDB_SCRAMBLE_LEN], size_t *data_len);
/* The same with room for cap bytes of data, copied as sent (a trailing
 * NUL is kept: client_ed25519's 32-byte nonce may end in a zero byte);
 * more than cap is -1, not truncated. */
int mdb_parse_auth_switch_data(const unsigned char *p, size_t len,
                               char plugin[MDB_PLUGIN_MAX], uint8_t *data,
                               size_t cap, size_t *data_len);

/* Parameters of the HandshakeResponse41 the backend side sends. */
struct mdb_login {
    uint32_t caps;
    uint32_t ext_caps;      /* non-zero: sent, and CLIENT_MYSQL cleared */
    uint8_t charset;
    const char *user;
    const uint8_t *token;   /* token_len bytes (0: MDB_SHA1_LEN), or
                             * NULL for an empty password */
    size_t token_len;
    const char *plugin;     /* NULL: mysql_native_password */
    const char *db;         /* "" for none */
    const unsigned char *attrs;   /* encoded pairs, may be NULL */
    size_t attrs_len;
};

/* Build a HandshakeResponse41 payload into out[cap]; returns its length or
 * 0 when cap is too small. */
size_t mdb_build_login(unsigned char *out, size_t cap,
                       const struct mdb_login *l);
/* Build a COM_CHANGE_USER payload (same fields, caps decide the layout). */
size_t mdb_build_change_user(unsigned char *out, size_t cap,
                             const struct mdb_login *l);

/* Append one key/value pair to an attrs block at out[*off..cap); false when
 * it does not fit. */
bool mdb_attrs_put(unsigned char *out, size_t cap, size_t *off,
                   const char *key, const void *val, size_t vlen);

/* COM_CHANGE_USER payload (starting at the 0x11 byte) decoded against the
 * session's capabilities. 0 or -1 on malformed input. */
int mdb_parse_change_user(const unsigned char *p, size_t len, uint32_t caps,
                          struct mdb_hello *h);

/* ---- mysql_native_password ---- */

/* A source of cryptographic random bytes, RAND_bytes's contract: 1 on
 * success, anything else on failure. */
typedef int (*mdb_rand_fn)(unsigned char *buf, int num);
/*
 * A fresh scramble from rand_fn (NULL = OpenSSL's RAND_bytes), mapped to
 * printable bytes (33..126) as the server makes them: clients treat it as
 * a NUL-terminated string. 0, or -1 when rand_fn fails: there is no safe
 * fallback (a guessable scramble makes tokens replayable), so the caller
 * refuses the connection.
 */
int mdb_make_scramble(uint8_t s[MDB_SCRAMBLE_LEN], mdb_rand_fn rand_fn);

void mdb_sha1(const void *data, size_t len, uint8_t out[MDB_SHA1_LEN]);
/* token = SHA1(pw) XOR SHA1(scramble || SHA1(SHA1(pw))), from SHA1(pw). */
void mdb_native_token(const uint8_t sha1pw[MDB_SHA1_LEN],
                      const uint8_t scramble[MDB_SCRAMBLE_LEN],
                      uint8_t token[MDB_SHA1_LEN]);
/*
 * Check a client's token against the stored SHA1(SHA1(pw)). An account
 * without password (has_pw false) accepts only an empty token. On success
 * with a password, sha1pw receives SHA1(pw) recovered from the token.
 */
bool mdb_native_check(const uint8_t *token, size_t token_len,
                      const uint8_t scramble[MDB_SCRAMBLE_LEN], bool has_pw,
                      const uint8_t stored[MDB_SHA1_LEN],
                      uint8_t sha1pw[MDB_SHA1_LEN]);
/* A password in clear against the stored SHA1(SHA1(pw)) (an account
 * without password takes only ""). On success sha1pw gets SHA1(pw). */
bool mdb_native_check_password(const uint8_t *pw, size_t pw_len,
                               bool has_pw,
                               const uint8_t stored[MDB_SHA1_LEN],
                               uint8_t sha1pw[MDB_SHA1_LEN]);
/* Parse "*" + 40 hex digits; 1 for a hash, 0 for "" (no password), -1 for
 * anything else (another plugin's string). */
int mdb_parse_stored(const char *s, uint8_t stored[MDB_SHA1_LEN]);

/* ---- MariaDB's ed25519 plugin (mdb_ed25519.c) ---- */
#define MDB_ED25519_KEY_LEN 32
#define MDB_ED25519_SIG_LEN 64
#define MDB_ED25519_NONCE_LEN 32   /* the server's challenge */
#define MDB_ED25519_HASH_LEN 64    /* SHA-512(password) */
/* An ed25519 account's authentication_string (base64 of the 32-byte
 * public key, 43 characters, no padding) into pk. 0, or -1 if malformed. */
int mdb_ed25519_parse_key(const char *s, uint8_t pk[MDB_ED25519_KEY_LEN]);
/* Is sig a valid pure-Ed25519 signature of msg under pk (OpenSSL)?
 * Any sig_len other than 64 is false. */
bool mdb_ed25519_verify(const uint8_t pk[MDB_ED25519_KEY_LEN],
                        const uint8_t *msg, size_t msg_len,
                        const uint8_t *sig, size_t sig_len);
/* The public key MariaDB stores for a password (what
 * ed25519_password(pw) returns, decoded). 0 or -1. */
int mdb_ed25519_public_key(const char *pw, size_t pw_len,
                           uint8_t pk[MDB_ED25519_KEY_LEN]);
/* Sign msg as MariaDB's client_ed25519 does with password pw (SHA-512 of
 * the password as the expanded key; libsodium). 0 or -1. */
int mdb_ed25519_sign(const char *pw, size_t pw_len, const uint8_t *msg,
                     size_t msg_len, uint8_t sig[MDB_ED25519_SIG_LEN]);
/* SHA-512(pw): all the signer needs, so a holder of a backend credential
 * keeps this rather than the password. 0 or -1. */
int mdb_ed25519_hash_password(const char *pw, size_t pw_len,
                              uint8_t hpw[MDB_ED25519_HASH_LEN]);
/* mdb_ed25519_sign from SHA-512(pw). 0 or -1. */
int mdb_ed25519_sign_hash(const uint8_t hpw[MDB_ED25519_HASH_LEN],
                          const uint8_t *msg, size_t msg_len,
                          uint8_t sig[MDB_ED25519_SIG_LEN]);

/* ---- caching_sha2_password (mdb_sha2.c) ---- */
#define MDB_SHA256_LEN 32
#define MDB_SHA2_CLIENT_PLUGIN "caching_sha2_password"
struct evp_pkey_st;   /* OpenSSL's EVP_PKEY */
/* SHA256(pw). */
void mdb_sha256_password(const void *pw, size_t len,
                         uint8_t out[MDB_SHA256_LEN]);
/* The fast-path token a client sends for SHA256(pw) and the server's
 * nonce: SHA256(pw) XOR SHA256(SHA256(SHA256(pw)) || nonce). */
void mdb_sha2_token(const uint8_t sha256pw[MDB_SHA256_LEN],
                    const uint8_t *nonce, size_t nonce_len,
                    uint8_t token[MDB_SHA256_LEN]);
/* Is token the fast-path token of SHA256(pw) for nonce? Any length other
 * than 32 is false. Constant time in the token's bytes. */
bool mdb_sha2_fast_check(const uint8_t *token, size_t token_len,
                         const uint8_t *nonce, size_t nonce_len,
                         const uint8_t sha256pw[MDB_SHA256_LEN]);
/* A fresh RSA key pair of bits bits, or NULL. */
struct evp_pkey_st *mdb_rsa_generate(int bits);
void mdb_rsa_free(struct evp_pkey_st *key);
/* The public half as PEM (SubjectPublicKeyInfo, "BEGIN PUBLIC KEY", what
 * clients expect after a 0x02 request) into out[cap], NUL-terminated;
 * its length, or 0 when it does not fit. */
size_t mdb_rsa_public_pem(struct evp_pkey_st *key, char *out, size_t cap);
/* A public key from PEM, or NULL (tests, the backend side). */
struct evp_pkey_st *mdb_rsa_public_from_pem(const char *pem, size_t len);
/* The modulus size in bytes: the length of every ciphertext. */
size_t mdb_rsa_size(const struct evp_pkey_st *key);
/* A client's RSA answer: OAEP-decrypt in (exactly mdb_rsa_size bytes),
 * XOR with the nonce repeated, and take the password before its final
 * NUL into pw[cap] (*pw_len bytes, not NUL-terminated). 0, or -1 for
 * anything that does not decrypt to that shape. Intermediate buffers
 * are wiped. */
int mdb_rsa_decrypt_password(struct evp_pkey_st *key, const uint8_t *in,
                             size_t in_len, const uint8_t *nonce,
                             size_t nonce_len, uint8_t *pw, size_t cap,
                             size_t *pw_len);
/* What a client sends: RSA-OAEP((pw NUL) XOR nonce) into out[cap]; its
 * length, or 0. */
size_t mdb_rsa_encrypt_password(struct evp_pkey_st *key, const char *pw,
                                size_t pw_len, const uint8_t *nonce,
                                size_t nonce_len, uint8_t *out, size_t cap);

/* ---- caching_sha2_password's cache (mdb_sha2.c) ---- */

struct mdb_account;
struct mdb_users;

/* SHA256(pw) of an account that passed the full authentication, with
 * SHA1(pw) for its backend logins (the fast path proves only
 * SHA256(pw)) and the stored hash it was checked against. */
struct mdb_sha2_entry {
    char *user;
    char *host;
    uint8_t stored[MDB_SHA1_LEN];
    uint8_t sha256pw[MDB_SHA256_LEN];
    uint8_t sha1pw[MDB_SHA1_LEN];
    uint64_t used;            /* the cache's tick when last used */
};

/* At most cap entries, the least recently used evicted first; every
 * entry that goes is wiped (OPENSSL_cleanse). Not thread-safe: the
 * caller locks (the account cache's mutex). */
struct mdb_sha2_cache {
    struct mdb_sha2_entry *v;
    size_t n;
    size_t cap;
    uint64_t tick;
};

/* 0, or -1 when out of memory. */
int mdb_sha2_cache_init(struct mdb_sha2_cache *c, size_t cap);
void mdb_sha2_cache_free(struct mdb_sha2_cache *c);
/* The entry of account a (its user and host), or NULL. An entry made
 * against another stored hash than a's (the password changed), or for an
 * account without password, is wiped and NULL returned. */
const struct mdb_sha2_entry *mdb_sha2_cache_find(struct mdb_sha2_cache *c,
                                                 const struct mdb_account *a);
/* Remember password pw of account a (it was just checked against a's
 * stored hash). 0, or -1 when out of memory (nothing cached). */
int mdb_sha2_cache_put(struct mdb_sha2_cache *c, const struct mdb_account *a,
                       const uint8_t *pw, size_t pw_len);
/* After a load of the accounts: wipe the entries of accounts that are
 * gone from u or whose stored hash changed. */
void mdb_sha2_cache_sweep(struct mdb_sha2_cache *c, const struct mdb_users *u);
/* ---- dialog and mysql_clear_password (mdb_dialog.c), for PAM ---- */

/* A dialog question into out[cap]: with first, the AuthSwitchRequest to
 * "dialog" that carries it. echo: the answer is echoed (2), else a
 * password (4). Its length, or 0 when cap is too small. */
size_t mdb_dialog_question(unsigned char *out, size_t cap, bool first,
                           bool echo, const char *text, size_t text_len);
/* A client's answer to a dialog question (or its mysql_clear_password
 * packet): the string, its terminator dropped, into out[cap] (NUL-
 * terminated), *out_len its length. -1 when it does not fit or has a NUL
 * inside. */
int mdb_dialog_answer(const unsigned char *p, size_t len, char *out,
                      size_t cap, size_t *out_len);
/* A server's dialog question (the AuthSwitchRequest's data, or a later
 * packet): 0 and *echo, or -1 when the first byte is no question type. */
int mdb_dialog_parse_question(const unsigned char *p, size_t len,
                              bool *echo);
/* Append answer a[alen] to the NUL-separated list buf[*len], cap bytes.
 * -1 when it does not fit or a has a NUL. */
int mdb_pam_answers_add(char *buf, size_t cap, size_t *len, const char *a,
                        size_t alen);
/* The i-th answer of the list (beyond its end: the last), *alen its
 * length; NULL for an empty or malformed list. */
const char *mdb_pam_answer_at(const char *buf, size_t len, size_t i,
                              size_t *alen);

/*
 * Replaying a client's PAM answers to a server's auth_pam (backend and
 * KILL logins). MariaDB's auth_pam switches to dialog with no question:
 * the client plugin answers at once, and the server uses that answer for
 * its conversation's first prompt when it is a password prompt, asking an
 * echoed first prompt itself. So answer 0 goes ahead; when the client's
 * own first question was echoed (first_echo: the same PAM stack prompts
 * in the same order) the server discards it, and its first question
 * takes answer 0 again. Beyond the answers, the last one again.
 */
enum mdb_pam_step {
    MDB_PAM_SWITCH_DIALOG,   /* AuthSwitchRequest to dialog; p its data */
    MDB_PAM_SWITCH_CLEAR,    /* AuthSwitchRequest to mysql_clear_password */
    MDB_PAM_QUESTION,        /* a later dialog packet p */
};

struct mdb_pam_replay {
    bool two_factor;         /* pam_mode=password_2FA (the caller's): the
                              * answers are the password and the code;
                              * a question whose text has "password"
                              * gets the first, any other the second */
    uint8_t next;            /* the answer the next step gets */
    bool ahead;              /* answer 0 went with a bare switch */
    bool dialog;             /* the server speaks dialog */
};

/* pam_mode=password_2FA: is PAM's prompt (or a server's dialog question
 * text) one for the password, i.e. does it contain "password" in any
 * case (MaxScale's rule)? Any other prompt is answered with the code. */
bool mdb_pam_is_password_prompt(const char *text, size_t len);

/* The answer (into answers[len], *alen its length, without terminator)
 * for this step; NULL when there is none (no answers, not a question). */
const char *mdb_pam_replay(struct mdb_pam_replay *r, const char *answers,
                           size_t len, bool first_echo,
                           enum mdb_pam_step step, const unsigned char *p,
                           size_t plen, size_t *alen);

/* ---- accounts and host matching ---- */

/* mysql.global_priv's ssl_type: REQUIRE NONE, SSL, X509, or ISSUER /
 * SUBJECT / CIPHER (SPECIFIED). */
enum mdb_ssl_type {
    MDB_SSL_NONE = 0,
    MDB_SSL_ANY = 1,
    MDB_SSL_X509 = 2,
    MDB_SSL_SPECIFIED = 3,
};

/*
 * One account. Beyond user, host and password: what the server enforces
 * at login and Sluice must too, since the server only sees Sluice's own
 * link (mysql.global_priv; all zero/NULL when unknown).
 */
struct mdb_account {
    char *user;
    char *host;
    uint8_t stored[MDB_SHA1_LEN];
    bool has_pw;
    bool native;        /* usable with mysql_native_password (one of
                         * its auth_or alternatives is) */
    bool ed25519;       /* one alternative is ed25519 with a key */
    uint8_t ed_pk[MDB_ED25519_KEY_LEN];  /* its public key, then */
    bool pam;           /* one alternative is pam (auth_pam) */
    char *pam_service;  /* its PAM service ("mysql" when the account
                         * names none), when pam */
    char *plugins;      /* its plugins in the server's order, comma-
                         * separated ("ed25519,mysql_native_password"),
                         * or NULL when unknown */
    int rank;           /* host specificity; lower sorts first */
    uint8_t ssl_type;   /* enum mdb_ssl_type */
    char *ssl_cipher;   /* REQUIRE CIPHER, or NULL */
    char *x509_issuer;  /* REQUIRE ISSUER, or NULL */
    char *x509_subject; /* REQUIRE SUBJECT, or NULL */
    bool locked;        /* ACCOUNT LOCK */
    int64_t pw_changed; /* epoch s; 0: PASSWORD EXPIRE; -1: unknown */
    int32_t pw_lifetime; /* days; -1: the server's default; 0: never */
    uint32_t max_user_connections;   /* 0: no limit */
    uint32_t max_connections_hour;   /* MAX_CONNECTIONS_PER_HOUR */
};

struct mdb_users {
    struct mdb_account *v;
    size_t n;
    size_t cap;
    int32_t default_pw_lifetime;     /* @@default_password_lifetime */
    bool disconnect_expired;         /* @@disconnect_on_expired_password */
};

/* The client's TLS state, for an account's REQUIRE clause. */
struct mdb_peer {
    bool tls;
    const char *cipher;      /* "" when plain */
    bool cert_ok;            /* a certificate that verified */
    const char *issuer;      /* its names, X509_NAME_oneline form */
    const char *subject;
};

/* Does the client meet the account's REQUIRE clause (as MariaDB checks
 * it: SSL = any TLS; X509 = a verified certificate; CIPHER, ISSUER and
 * SUBJECT = exact strings)? */
bool mdb_account_tls_ok(const struct mdb_account *a,
                        const struct mdb_peer *p);
/* Has the account's password expired at epoch second now? PASSWORD
 * EXPIRE, or older than its lifetime (default_days when it has none). */
bool mdb_account_pw_expired(const struct mdb_account *a,
                            int32_t default_days, int64_t now);

/* Add an account from mysql.user columns (auth may be a `*HEX` hash or
 * empty; plugin may be NULL or ""). 0 or -1 on allocation failure. */
int mdb_users_add(struct mdb_users *u, const char *user, const char *host,
                  const char *auth, const char *plugin);
/* Add an account from a mysql.global_priv row: user, host and the Priv
 * JSON (NULL or unreadable: an account no password matches). With an
 * auth_or list the account uses its first mysql_native_password
 * alternative (or, without one, is not native) and a->plugins lists them
 * all. Roles are skipped. 0 or -1 on allocation failure. */
int mdb_users_add_priv(struct mdb_users *u, const char *user,
                       const char *host, const char *priv);
/* Mark a as a pam account with PAM service service (NULL or "": "mysql",
 * as the server's auth_pam). 0 or -1 out of memory. */
int mdb_account_set_pam(struct mdb_account *a, const char *service);
/* Sort as MariaDB does: exact hosts, then patterns, '%' last; named users
 * before anonymous ones. */
void mdb_users_sort(struct mdb_users *u);
void mdb_users_free(struct mdb_users *u);
/* The first account matching user and client (NULL if none). client is the
 * peer address as text; is_unix for unix-socket clients. Anonymous
 * accounts are not used. */
const struct mdb_account *mdb_users_find(const struct mdb_users *u,
                                         const char *user,
                                         const char *client, bool is_unix);
/* Does a mysql.user Host pattern match the client? */
bool mdb_host_match(const char *pattern, const char *client, bool is_unix);

/* ---- user_mapping_file (mdb_usermap.c) ----
 * MaxScale's JSON: {"user_map": [{"original_user": U, "mapped_user": M}],
 * "server_credentials": [{"mapped_user": M, "password": P,
 * "plugin": "mysql_native_password" | "ed25519"}]}. A mapped user without
 * credentials logs in to the servers with an empty native password, as in
 * MaxScale. "group_map" (Linux groups) is refused when not empty. */
struct mdb_usermap_entry {
    char *user;        /* original_user */
    char *mapped;      /* mapped_user */
};

struct mdb_usermap_cred {
    char *user;        /* mapped_user */
    char *password;
    bool ed25519;      /* plugin ed25519 (else mysql_native_password) */
};

struct mdb_usermap {
    struct mdb_usermap_entry *map;
    size_t n_map;
    struct mdb_usermap_cred *creds;
    size_t n_creds;
};

/* Parse the file's text; 0, or -1 with err[errlen] saying what is wrong
 * (and *m left empty). */
int mdb_usermap_parse(const char *text, size_t len, struct mdb_usermap *m,
                      char *err, size_t errlen);
/* Wipes the passwords. */
void mdb_usermap_free(struct mdb_usermap *m);
/* The mapping of user: NULL if not mapped; else the mapped user, and
 * *cred its credentials (NULL: none, an empty native password). */
const char *mdb_usermap_find(const struct mdb_usermap *m, const char *user,
                             const struct mdb_usermap_cred **cred);

#endif
