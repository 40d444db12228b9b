/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unit tests of the protocol module's pure login code (sl_mariadb_parse):
 * mysql_native_password token math, the server and client handshakes as
 * real MariaDB 10.11 and its `mariadb` client send them (captured through
 * a relay), truncation at every offset, COM_CHANGE_USER decoding,
 * MariaDB's host matching and account order, and mysql.global_priv rows
 * (auth_or lists) as MariaDB 10.11 stores them, and the ed25519
 * plugin's key decoding, verification (OpenSSL) and signing (libsodium)
 * against a public key MariaDB 10.11 stored, and caching_sha2_password's
 * fast-path token and RSA exchange (a ciphertext PyMySQL made).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <openssl/pem.h>

#include "mdb_accfile.h"
#include "mdb_kill.h"
#include "mdb_parse.h"

/* Decode hex into a fresh buffer; *len gets its size. */
static unsigned char *
unhex(const char *hex, size_t *len)
{
    size_t n = strlen(hex) / 2;
    unsigned char *p = malloc(n + 1);

    assert_non_null(p);
    for (size_t i = 0; i < n; i++) {
        unsigned v;
        sscanf(hex + 2 * i, "%2x", &v);
        p[i] = (unsigned char)v;
    }
    *len = n;
    return p;
}

/*
 * Known vector, computed with Python hashlib:
 *   h1 = sha1(b"secret")            = e5e9fa1ba31ecd1ae84f75caaa474f3a663f05f4
 *   h2 = sha1(h1)  (stored)         = 14e65567abdb5135d0cfd9a70b3032c179a49ee7
 *   token = h1 XOR sha1(b"abcdefghijklmnopqrst" + h2)
 *                                   = 8817c50fa779daef010ee7577825b0847df9842e
 * and the server agrees: SELECT PASSWORD('secret') =
 *   *14E65567ABDB5135D0CFD9A70B3032C179A49EE7
 */
static void
test_token_vector(void **state)
{
    const uint8_t *scramble = (const uint8_t *)"abcdefghijklmnopqrst";
    uint8_t sha1pw[20], stored[20], token[20], rec[20];
    size_t n;
    unsigned char *want_token =
        unhex("8817c50fa779daef010ee7577825b0847df9842e", &n);
    unsigned char *want_h1 =
        unhex("e5e9fa1ba31ecd1ae84f75caaa474f3a663f05f4", &n);

    mdb_sha1("secret", 6, sha1pw);
    assert_memory_equal(sha1pw, want_h1, 20);
    assert_int_equal(
        mdb_parse_stored("*14E65567ABDB5135D0CFD9A70B3032C179A49EE7", stored),
        1);
    mdb_native_token(sha1pw, scramble, token);
    assert_memory_equal(token, want_token, 20);
    assert_true(mdb_native_check(token, 20, scramble, true, stored, rec));
    assert_memory_equal(rec, sha1pw, 20);
    /* Wrong password, wrong length, empty token for a password account. */
    token[0] ^= 1;
    assert_false(mdb_native_check(token, 20, scramble, true, stored, rec));
    assert_false(mdb_native_check(token, 19, scramble, true, stored, rec));
    assert_false(mdb_native_check(token, 0, scramble, true, stored, rec));
    /* No password: only an empty token. */
    assert_true(mdb_native_check(NULL, 0, scramble, false, stored, rec));
    assert_false(mdb_native_check(token, 20, scramble, false, stored, rec));
    free(want_token);
    free(want_h1);
}

static void
test_parse_stored(void **state)
{
    uint8_t s[20];

    assert_int_equal(mdb_parse_stored("", s), 0);
    assert_int_equal(mdb_parse_stored(NULL, s), 0);
    assert_int_equal(mdb_parse_stored("invalid", s), -1);
    assert_int_equal(
        mdb_parse_stored("*14E65567ABDB5135D0CFD9A70B3032C179A49EEZ", s), -1);
    assert_int_equal(
        mdb_parse_stored("*14e65567abdb5135d0cfd9a70b3032c179a49ee7", s), 1);
    assert_int_equal(s[0], 0x14);
}

/* Server greeting and the `mariadb` client's answer for alice/secret. */
static const char server_hello_hex[] =
    "0a352e352e352d31302e31312e31392d4d6172696144422d302b6465623132753100"
    "0b00000022242b4d24675e2300fef7080200ff81150000000000001d000000316b4b"
    "74265a7766794e5b5d006d7973716c5f6e61746976655f70617373776f726400";
static const char client_hello_hex[] =
    "84a2bf000000100021000000000000000000000000000000000000001d000000616c"
    "69636500145a1c33d0ff60eb2136a809b7007f80e7cf85e4146d7973716c5f6e6174"
    "6976655f70617373776f7264007f035f6f73054c696e75780c5f636c69656e745f6e"
    "616d650a6c69626d617269616462045f7069640531333039350f5f636c69656e745f"
    "76657273696f6e06332e332e3230095f706c6174666f726d067838365f36340c7072"
    "6f6772616d5f6e616d65056d7973716c0c5f7365727665725f686f7374093132372e"
    "302e302e31";
/* root with -D mysql and no password. */
static const char client_db_hex[] =
    "8ca2bf000000100021000000000000000000000000000000000000001d000000726f"
    "6f7400006d7973716c006d7973716c5f6e61746976655f70617373776f7264007f03"
    "5f6f73054c696e75780c5f636c69656e745f6e616d650a6c69626d61726961646204"
    "5f7069640531333039380f5f636c69656e745f76657273696f6e06332e332e323009"
    "5f706c6174666f726d067838365f36340c70726f6772616d5f6e616d65056d797371"
    "6c0c5f7365727665725f686f7374093132372e302e302e31";

static void
test_real_login(void **state)
{
    size_t sl, cl;
    unsigned char *s = unhex(server_hello_hex, &sl);
    unsigned char *c = unhex(client_hello_hex, &cl);
    struct mdb_server_hello sh;
    struct mdb_hello h;
    uint8_t stored[20], rec[20];
    const unsigned char *v;
    size_t vlen;

    assert_int_equal(mdb_parse_server_hello(s, sl, &sh), 0);
    assert_string_equal(sh.version, "5.5.5-10.11.19-MariaDB-0+deb12u1");
    assert_int_equal(sh.thread_id, 11);
    assert_string_equal(sh.plugin, MDB_NATIVE_PLUGIN);
    assert_true(sh.caps & SL_CAP_DEPRECATE_EOF);
    assert_memory_equal(sh.scramble, "\"$+M$g^#1kKt&ZwfyN[]", 20);

    assert_int_equal(mdb_parse_hello(c, cl, &h), 0);
    assert_false(h.ssl_request);
    assert_string_equal(h.user, "alice");
    assert_int_equal(h.auth_len, 20);
    assert_string_equal(h.db, "");
    assert_string_equal(h.plugin, MDB_NATIVE_PLUGIN);
    assert_int_equal(h.charset, 33);
    assert_true(h.caps & SL_CAP_CONNECT_ATTRS);
    assert_true(mdb_attrs_find(h.attrs, h.attrs_len, "program_name", &v,
                               &vlen));
    assert_int_equal(vlen, 5);
    assert_memory_equal(v, "mysql", 5);
    assert_false(mdb_attrs_find(h.attrs, h.attrs_len, "nope", &v, &vlen));

    /* The real client's token verifies against PASSWORD('secret'). */
    mdb_parse_stored("*14E65567ABDB5135D0CFD9A70B3032C179A49EE7", stored);
    assert_true(
        mdb_native_check(h.auth, h.auth_len, sh.scramble, true, stored, rec));
    free(s);
    free(c);
}

static void
test_login_with_db(void **state)
{
    size_t n;
    unsigned char *c = unhex(client_db_hex, &n);
    struct mdb_hello h;

    assert_int_equal(mdb_parse_hello(c, n, &h), 0);
    assert_string_equal(h.user, "root");
    assert_int_equal(h.auth_len, 0);
    assert_string_equal(h.db, "mysql");
    assert_string_equal(h.plugin, MDB_NATIVE_PLUGIN);
    free(c);
}

/* Every proper prefix of a real response either parses to something
 * consistent or fails: never a crash or an overread (ASan build). */
static void
test_truncated(void **state)
{
    size_t n;
    unsigned char *c = unhex(client_db_hex, &n);
    struct mdb_hello h;
    size_t ok = 0;

    for (size_t i = 0; i < n; i++) {
        unsigned char *p = malloc(i ? i : 1);

        memcpy(p, c, i);
        if (mdb_parse_hello(p, i, &h) == 0) {
            ok++;
        }
        free(p);
    }
    /* Only cuts after the auth data can be accepted (optional tails). */
    assert_true(ok < n / 2);
    assert_int_equal(mdb_parse_hello(c, 10, &h), -1);
    free(c);

    unsigned char *s = unhex(server_hello_hex, &n);
    struct mdb_server_hello sh;
    for (size_t i = 0; i < n - 23; i++) {
        unsigned char *p = malloc(i ? i : 1);

        memcpy(p, s, i);
        assert_int_equal(mdb_parse_server_hello(p, i, &sh), -1);
        free(p);
    }
    free(s);
}

static void
test_ssl_request_and_garbage(void **state)
{
    unsigned char p[32] = {0};
    struct mdb_hello h;
    uint32_t caps = SL_CAP_PROTOCOL_41 | SL_CAP_SSL | SL_CAP_SECURE_CONNECTION;

    memcpy(p, &caps, 4);
    assert_int_equal(mdb_parse_hello(p, 32, &h), 0);
    assert_true(h.ssl_request);
    /* Without PROTOCOL_41 (a pre-4.1 client or garbage). */
    memset(p, 'G', sizeof(p));
    p[1] = 0;
    assert_int_equal(mdb_parse_hello(p, 32, &h), -1);
    /* Auth length past the end. */
    unsigned char q[40] = {0};
    caps = SL_CAP_PROTOCOL_41 | SL_CAP_SECURE_CONNECTION;
    memcpy(q, &caps, 4);
    memcpy(q + 32, "bob\0", 4);
    q[36] = 20;
    assert_int_equal(mdb_parse_hello(q, sizeof(q), &h), -1);
    /* Lenenc auth claiming 2^64-1 bytes. */
    caps |= SL_CAP_PLUGIN_AUTH_LENENC_DATA;
    memcpy(q, &caps, 4);
    q[36] = 0xfe;
    memset(q + 37, 0xff, 3);
    assert_int_equal(mdb_parse_hello(q, sizeof(q), &h), -1);
}

static void
test_build_round_trips(void **state)
{
    unsigned char out[512], attrs[128];
    uint8_t scr[20], tok[20];
    struct mdb_server_hello sh;
    struct mdb_hello h;
    size_t n, an = 0;
    const unsigned char *v;
    size_t vlen;

    memcpy(scr, "ABCDEFGHIJKLMNOPQRST", 20);
    n = mdb_build_handshake(out, sizeof(out), "5.5.5-10.11.6-MariaDB-sluice",
                            77, scr, MDB_SERVER_CAPS, 45);
    assert_true(n > 0);
    assert_int_equal(mdb_parse_server_hello(out, n, &sh), 0);
    assert_int_equal(sh.thread_id, 77);
    assert_memory_equal(sh.scramble, scr, 20);
    assert_int_equal(sh.caps, MDB_SERVER_CAPS);
    assert_false(sh.caps & (SL_CAP_SSL | SL_CAP_COMPRESS));
    assert_string_equal(sh.plugin, MDB_NATIVE_PLUGIN);
    assert_int_equal(mdb_build_handshake(out, 20, "v", 1, scr, 0, 8), 0);

    /* MariaDB extended capabilities: CLIENT_MYSQL cleared, ext caps
     * readable on the other side; a login carries them back. */
    n = mdb_build_handshake_ext(out, sizeof(out), "v", 5, scr,
                                MDB_SERVER_CAPS, MDB_EXT_CAPS, 45);
    assert_int_equal(mdb_parse_server_hello(out, n, &sh), 0);
    assert_int_equal(sh.caps, MDB_SERVER_CAPS & ~SL_CAP_LONG_PASSWORD);
    assert_int_equal(sh.ext_caps, MDB_EXT_EXTENDED_METADATA);
    {
        struct mdb_login el = {.caps = SL_CAP_PROTOCOL_41 |
                                       SL_CAP_SECURE_CONNECTION |
                                       SL_CAP_LONG_PASSWORD,
                               .ext_caps = MDB_EXT_EXTENDED_METADATA,
                               .charset = 45, .user = "u", .db = ""};

        n = mdb_build_login(out, sizeof(out), &el);
        assert_int_equal(mdb_parse_hello(out, n, &h), 0);
        assert_false(h.caps & SL_CAP_LONG_PASSWORD);
        assert_int_equal(h.ext_caps, MDB_EXT_EXTENDED_METADATA);
        el.ext_caps = 0;
        n = mdb_build_login(out, sizeof(out), &el);
        assert_int_equal(mdb_parse_hello(out, n, &h), 0);
        assert_int_equal(h.ext_caps, 0);   /* CLIENT_MYSQL: filler */
    }

    assert_true(mdb_attrs_put(attrs, sizeof(attrs), &an, "_client_name",
                              "sluice", 6));
    memset(tok, 0x5a, 20);
    struct mdb_login l = {
        .caps = MDB_SERVER_CAPS,
        .charset = 45,
        .user = "alice",
        .token = tok,
        .db = "test",
        .attrs = attrs,
        .attrs_len = an,
    };
    n = mdb_build_login(out, sizeof(out), &l);
    assert_true(n > 0);
    assert_int_equal(mdb_parse_hello(out, n, &h), 0);
    assert_string_equal(h.user, "alice");
    assert_string_equal(h.db, "test");
    assert_int_equal(h.auth_len, 20);
    assert_memory_equal(h.auth, tok, 20);
    assert_int_equal(h.charset, 45);
    assert_true(mdb_attrs_find(h.attrs, h.attrs_len, "_client_name", &v,
                               &vlen));

    /* COM_CHANGE_USER round trip, with and without a password. */
    n = mdb_build_change_user(out, sizeof(out), &l);
    assert_true(n > 0);
    assert_int_equal(mdb_parse_change_user(out, n, MDB_SERVER_CAPS, &h), 0);
    assert_string_equal(h.user, "alice");
    assert_string_equal(h.db, "test");
    assert_int_equal(h.auth_len, 20);
    assert_int_equal(h.charset, 45);
    assert_string_equal(h.plugin, MDB_NATIVE_PLUGIN);
    l.token = NULL;
    l.db = "";
    n = mdb_build_change_user(out, sizeof(out), &l);
    assert_int_equal(mdb_parse_change_user(out, n, MDB_SERVER_CAPS, &h), 0);
    assert_int_equal(h.auth_len, 0);
    for (size_t i = 0; i < n; i++) {
        mdb_parse_change_user(out, i, MDB_SERVER_CAPS, &h);   /* no crash */
    }
}

static void
test_auth_switch_parse(void **state)
{
    static const unsigned char req[] =
        "\xfemysql_native_password\0ABCDEFGHIJKLMNOPQRST";
    char plugin[MDB_PLUGIN_MAX];
    uint8_t data[20];
    size_t n;

    assert_int_equal(
        mdb_parse_auth_switch(req, sizeof(req), plugin, data, &n), 0);
    assert_string_equal(plugin, MDB_NATIVE_PLUGIN);
    assert_int_equal(n, 20);
    assert_memory_equal(data, "ABCDEFGHIJKLMNOPQRST", 20);
    assert_int_equal(mdb_parse_auth_switch(req + 1, 5, plugin, data, &n), -1);
}

static void
test_host_match(void **state)
{
    assert_true(mdb_host_match("%", "10.1.2.3", false));
    assert_true(mdb_host_match("%", "localhost", true));
    assert_true(mdb_host_match("10.1.2.3", "10.1.2.3", false));
    assert_false(mdb_host_match("10.1.2.3", "10.1.2.30", false));
    assert_true(mdb_host_match("10.1.%", "10.1.2.30", false));
    assert_false(mdb_host_match("10.1.%", "10.11.2.30", false));
    assert_true(mdb_host_match("10.1._.3", "10.1.2.3", false));
    assert_false(mdb_host_match("10.1._.3", "10.1.22.3", false));
    assert_true(mdb_host_match("10.0.0.0/255.0.0.0", "10.200.1.1", false));
    assert_false(mdb_host_match("10.0.0.0/255.0.0.0", "11.0.0.1", false));
    assert_true(mdb_host_match("192.168.1.0/255.255.255.0",
                               "::ffff:192.168.1.9", false));
    assert_true(mdb_host_match("localhost", "localhost", true));
    assert_true(mdb_host_match("localhost", "127.0.0.1", false));
    assert_true(mdb_host_match("LOCALHOST", "::1", false));
    assert_false(mdb_host_match("localhost", "10.0.0.1", false));
    assert_true(mdb_host_match("%.%.%.%", "1.2.3.4", false));
    assert_true(mdb_host_match("1.2.3.%", "1.2.3.", false));
    assert_false(mdb_host_match("db.example.com", "10.0.0.1", false));
    assert_true(mdb_host_match("a\\_b", "a_b", false));
    assert_false(mdb_host_match("a\\_b", "axb", false));
}

static void
test_account_order(void **state)
{
    struct mdb_users u = {0};
    const struct mdb_account *a;
    const char *h = "*14E65567ABDB5135D0CFD9A70B3032C179A49EE7";

    assert_int_equal(mdb_users_add(&u, "bob", "%", "", NULL), 0);
    assert_int_equal(mdb_users_add(&u, "bob", "10.%", h, ""), 0);
    assert_int_equal(mdb_users_add(&u, "bob", "10.1.2.3", h,
                                   "mysql_native_password"), 0);
    assert_int_equal(mdb_users_add(&u, "bob", "10.0.0.0/255.0.0.0", h, ""),
                     0);
    assert_int_equal(mdb_users_add(&u, "", "localhost", "", NULL), 0);
    assert_int_equal(mdb_users_add(&u, "sock", "localhost", "invalid",
                                   "unix_socket"), 0);
    mdb_users_sort(&u);

    a = mdb_users_find(&u, "bob", "10.1.2.3", false);
    assert_non_null(a);
    assert_string_equal(a->host, "10.1.2.3");
    a = mdb_users_find(&u, "bob", "10.9.9.9", false);
    assert_string_equal(a->host, "10.0.0.0/255.0.0.0");
    a = mdb_users_find(&u, "bob", "192.168.0.1", false);
    assert_string_equal(a->host, "%");
    assert_false(a->has_pw);
    /* Anonymous accounts are not used. */
    assert_null(mdb_users_find(&u, "carol", "localhost", true));
    a = mdb_users_find(&u, "sock", "localhost", true);
    assert_non_null(a);
    assert_false(a->native);
    mdb_users_free(&u);
}

/* mysql.global_priv rows as MariaDB 10.11.19 stored them for
 *   aor: IDENTIFIED VIA ed25519 USING PASSWORD('edpw')
 *           OR mysql_native_password USING PASSWORD('natpw')
 *   nor: the same two the other way round
 *   eonly: IDENTIFIED VIA ed25519 USING PASSWORD('edpw')
 * (SELECT Priv FROM mysql.global_priv). */
#define NATPW_HASH "*1374EDB489482E02B373F1E4764607ADEACA73BB"
#define EDPW_KEY "LIEvGDGjHTmKyz3peLRjPqahOct5n6/BQCNm1bOvot4"
static const char *const row_aor =
    "{\"access\":0,\"version_id\":101119,\"plugin\":\"mysql_native_password\","
    "\"authentication_string\":\"" NATPW_HASH "\",\"auth_or\":[{\"plugin\":"
    "\"ed25519\",\"authentication_string\":\"" EDPW_KEY "\"},{}],"
    "\"password_last_changed\":1795495567}";
static const char *const row_nor =
    "{\"access\":0,\"version_id\":101119,\"plugin\":\"mysql_native_password\","
    "\"authentication_string\":\"" NATPW_HASH "\",\"auth_or\":[{},{\"plugin\":"
    "\"ed25519\",\"authentication_string\":\"" EDPW_KEY "\"}],"
    "\"password_last_changed\":1795495567}";
static const char *const row_eonly =
    "{\"access\":0,\"version_id\":101119,\"plugin\":\"ed25519\","
    "\"authentication_string\":\"" EDPW_KEY "\","
    "\"password_last_changed\":1795495567}";

/* The native token of password pw for scramble s checks against a. */
static bool
native_login(const struct mdb_account *a, const char *pw)
{
    const uint8_t *s = (const uint8_t *)"abcdefghijklmnopqrst";
    uint8_t sha1pw[20], token[20], rec[20];

    mdb_sha1(pw, strlen(pw), sha1pw);
    mdb_native_token(sha1pw, s, token);
    return a->native &&
           mdb_native_check(token, 20, s, a->has_pw, a->stored, rec);
}

static void
test_global_priv_auth_or(void **state)
{
    struct mdb_users u = {0};
    const struct mdb_account *a;

    (void)state;
    assert_int_equal(mdb_users_add_priv(&u, "aor", "%", row_aor), 0);
    assert_int_equal(mdb_users_add_priv(&u, "nor", "%", row_nor), 0);
    assert_int_equal(mdb_users_add_priv(&u, "eonly", "%", row_eonly), 0);
    mdb_users_sort(&u);

    /* ed25519 first, native second: the native alternative is used */
    a = mdb_users_find(&u, "aor", "10.0.0.1", false);
    assert_non_null(a);
    assert_string_equal(a->plugins, "ed25519,mysql_native_password");
    assert_true(native_login(a, "natpw"));
    assert_false(native_login(a, "edpw"));
    assert_int_equal(a->pw_changed, 1795495567);

    a = mdb_users_find(&u, "nor", "10.0.0.1", false);
    assert_non_null(a);
    assert_string_equal(a->plugins, "mysql_native_password,ed25519");
    assert_true(native_login(a, "natpw"));

    /* ed25519 alone: Sluice cannot check it natively */
    a = mdb_users_find(&u, "eonly", "10.0.0.1", false);
    assert_non_null(a);
    assert_false(a->native);
    assert_string_equal(a->plugins, "ed25519");
    assert_false(native_login(a, "edpw"));
    mdb_users_free(&u);
}

/* Rows MariaDB does not write but a hostile or damaged table could hold:
 * never a usable password out of nothing, never a crash. */
static void
test_global_priv_odd_rows(void **state)
{
    static const struct {
        const char *priv;
        bool native;
        bool has_pw;
        const char *plugins;
    } rows[] = {
        /* no plugin at all: native without a password (mysql.user view) */
        {"{\"access\":0}", true, false, "mysql_native_password"},
        /* two plugins, neither native */
        {"{\"plugin\":\"ed25519\",\"authentication_string\":\"" EDPW_KEY "\","
         "\"auth_or\":[{\"plugin\":\"unix_socket\"},{}]}",
         false, false, "unix_socket,ed25519"},
        /* a broken native alternative, then a good one */
        {"{\"plugin\":\"ed25519\",\"auth_or\":[{\"plugin\":"
         "\"mysql_native_password\",\"authentication_string\":\"*XYZ\"},"
         "{\"plugin\":\"mysql_native_password\",\"authentication_string\":\""
         NATPW_HASH "\"},{}]}",
         true, true, "mysql_native_password,mysql_native_password,ed25519"},
        /* auth_or not a list, members not objects, empty list */
        {"{\"plugin\":\"ed25519\",\"auth_or\":5}", false, false, "ed25519"},
        {"{\"plugin\":\"ed25519\",\"auth_or\":[7,\"x\"]}", false, false,
         "?,?"},
        {"{\"plugin\":\"ed25519\",\"auth_or\":[]}", false, false, "ed25519"},
        {"{\"auth_or\":[{\"plugin\":7,\"authentication_string\":9}]}",
         false, false, "?"},
        {"{\"plugin\":[],\"authentication_string\":\"\"}", false, false,
         "?"},
        {"{\"auth_or\":[{\"plugin\":\"mysql_native_password\","
         "\"authentication_string\":{}}]}", false, false, "?"},
        /* not an object, not JSON, no row */
        {"[1,2]", false, false, NULL},
        {"{\"plugin\":", false, false, NULL},
        {NULL, false, false, NULL},
    };

    (void)state;
    for (size_t i = 0; i < sizeof(rows) / sizeof(rows[0]); i++) {
        struct mdb_users u = {0};

        assert_int_equal(mdb_users_add_priv(&u, "x", "%", rows[i].priv), 0);
        assert_int_equal(u.n, 1);
        if (rows[i].native != u.v[0].native ||
            rows[i].has_pw != u.v[0].has_pw) {
            fail_msg("row %zu: native %d has_pw %d", i, u.v[0].native,
                     u.v[0].has_pw);
        }
        if (rows[i].plugins == NULL) {
            assert_null(u.v[0].plugins);
        } else {
            assert_non_null(u.v[0].plugins);
            assert_string_equal(u.v[0].plugins, rows[i].plugins);
        }
        mdb_users_free(&u);
    }
    /* roles are not accounts */
    {
        struct mdb_users u = {0};

        assert_int_equal(mdb_users_add_priv(&u, "r", "", "{\"is_role\":true}"),
                         0);
        assert_int_equal(u.n, 0);
        mdb_users_free(&u);
    }
}

static int
rand_fails(unsigned char *buf, int num)
{
    memset(buf, 7, (size_t)num);   /* whatever it wrote must not be used */
    return 0;
}

static int
rand_all_bytes(unsigned char *buf, int num)
{
    for (int i = 0; i < num; i++) {
        buf[i] = (unsigned char)(i * 13 + 200);
    }
    return 1;
}

/* A failing RNG refuses the scramble (no random() fallback); a working
 * one gives printable bytes, and the default (RAND_bytes) differs from
 * call to call. */
static void
test_scramble(void **state)
{
    uint8_t a[MDB_SCRAMBLE_LEN], b[MDB_SCRAMBLE_LEN];

    (void)state;
    assert_int_equal(mdb_make_scramble(a, rand_fails), -1);
    for (int i = 0; i < MDB_SCRAMBLE_LEN; i++) {
        assert_int_equal(a[i], 0);
    }
    assert_int_equal(mdb_make_scramble(a, rand_all_bytes), 0);
    for (int i = 0; i < MDB_SCRAMBLE_LEN; i++) {
        assert_in_range(a[i], 33, 126);
    }
    assert_int_equal(mdb_make_scramble(a, NULL), 0);
    assert_int_equal(mdb_make_scramble(b, NULL), 0);
    assert_memory_not_equal(a, b, MDB_SCRAMBLE_LEN);
}

static void
test_account_requirements(void **state)
{
    struct mdb_account a = {.ssl_type = MDB_SSL_NONE, .pw_changed = -1,
                            .pw_lifetime = -1};
    struct mdb_peer plain = {.cipher = ""};
    struct mdb_peer tls = {.tls = true, .cipher = "TLS_AES_256_GCM_SHA384",
                           .issuer = "", .subject = ""};
    struct mdb_peer cert = {.tls = true, .cipher = "AES256-SHA",
                            .cert_ok = true, .issuer = "/CN=ca",
                            .subject = "/CN=me"};
    char issuer[] = "/CN=ca", subject[] = "/CN=other", cipher[] = "AES256-SHA";

    assert_true(mdb_account_tls_ok(&a, &plain));
    a.ssl_type = MDB_SSL_ANY;
    assert_false(mdb_account_tls_ok(&a, &plain));
    assert_true(mdb_account_tls_ok(&a, &tls));
    a.ssl_type = MDB_SSL_X509;
    assert_false(mdb_account_tls_ok(&a, &tls));
    assert_true(mdb_account_tls_ok(&a, &cert));
    a.ssl_type = MDB_SSL_SPECIFIED;
    a.ssl_cipher = cipher;
    assert_false(mdb_account_tls_ok(&a, &tls));   /* another cipher */
    assert_true(mdb_account_tls_ok(&a, &cert));
    a.x509_issuer = issuer;
    assert_true(mdb_account_tls_ok(&a, &cert));
    a.x509_subject = subject;
    assert_false(mdb_account_tls_ok(&a, &cert));  /* another subject */
    cert.cert_ok = false;
    a.x509_subject = NULL;
    assert_false(mdb_account_tls_ok(&a, &cert));  /* unverified */

    /* expiry: 0 = PASSWORD EXPIRE; lifetime in days, -1 the default */
    assert_false(mdb_account_pw_expired(&a, 0, 1000000));
    a.pw_changed = 0;
    assert_true(mdb_account_pw_expired(&a, 0, 1000000));
    a.pw_changed = 1000000;
    assert_false(mdb_account_pw_expired(&a, 0, 1000000 + 400 * 86400));
    assert_true(mdb_account_pw_expired(&a, 10, 1000000 + 10 * 86400));
    assert_false(mdb_account_pw_expired(&a, 10, 1000000 + 9 * 86400));
    a.pw_lifetime = 0;   /* PASSWORD EXPIRE NEVER beats the default */
    assert_false(mdb_account_pw_expired(&a, 10, 1000000 + 99 * 86400));
    a.pw_lifetime = 2;
    assert_true(mdb_account_pw_expired(&a, 0, 1000000 + 2 * 86400));
}

static bool
kp(const char *sql, struct mdb_kill_stmt *k)
{
    return mdb_kill_parse(sql, strlen(sql), k);
}

static void
test_kill_parse(void **state)
{
    struct mdb_kill_stmt k;

    (void)state;
    assert_true(kp("KILL 12", &k));
    assert_false(k.query);
    assert_int_equal(k.id, 12);
    assert_true(kp("  kill query 4294967295 ;\n", &k));
    assert_true(k.query);
    assert_int_equal(k.id, 4294967295u);
    assert_true(kp("KILL HARD CONNECTION 7", &k));
    assert_true(k.hard);
    assert_false(k.query);
    assert_true(kp("KILL SOFT QUERY 7", &k));
    assert_false(k.hard);
    assert_true(kp("KILL QUERY USER 'bob'@'%';", &k));
    assert_true(k.by_user && k.query);
    assert_string_equal(k.user_spec, "'bob'@'%'");
    /* the server's own: query ids, expressions, junk, overflow */
    assert_false(kp("KILL QUERY ID 5", &k));
    assert_false(kp("KILL (SELECT 1)", &k));
    assert_false(kp("KILL 5 6", &k));
    assert_false(kp("KILL 4294967296", &k));
    assert_false(kp("KILLER 5", &k));
    assert_false(kp("KILL QUERYX 5", &k));
    assert_false(kp("KILL USER ", &k));
    assert_false(kp("SELECT 1", &k));
}

/*
 * MariaDB 10.11 (sandbox db1, auth_ed25519 installed):
 *   CREATE USER 'edvec'@'%' IDENTIFIED VIA ed25519 USING PASSWORD('x');
 *   SELECT authentication_string FROM mysql.user WHERE user = 'edvec';
 */
static const char ED_STORED_X[] = "Gv2JI8Env2fd5YGonZ082tX3UAW+yJYldOlj4R1bfK4";

static void
test_ed25519_parse_key(void **state)
{
    uint8_t pk[MDB_ED25519_KEY_LEN];
    uint8_t want[] = {0x1a, 0xfd, 0x89, 0x23, 0xc1, 0x27, 0xbf, 0x67};

    (void)state;
    assert_int_equal(mdb_ed25519_parse_key(ED_STORED_X, pk), 0);
    assert_memory_equal(pk, want, sizeof(want));
    assert_int_equal(mdb_ed25519_parse_key(NULL, pk), -1);
    assert_int_equal(mdb_ed25519_parse_key("", pk), -1);
    /* one character short, one too many, padded, not base64 */
    assert_int_equal(mdb_ed25519_parse_key(
        "Gv2JI8Env2fd5YGonZ082tX3UAW+yJYldOlj4R1bfK", pk), -1);
    assert_int_equal(mdb_ed25519_parse_key(
        "Gv2JI8Env2fd5YGonZ082tX3UAW+yJYldOlj4R1bfK4A", pk), -1);
    assert_int_equal(mdb_ed25519_parse_key(
        "Gv2JI8Env2fd5YGonZ082tX3UAW+yJYldOlj4R1bfK=", pk), -1);
    assert_int_equal(mdb_ed25519_parse_key(
        "*v2JI8Env2fd5YGonZ082tX3UAW+yJYldOlj4R1bfK4", pk), -1);
    assert_int_equal(mdb_ed25519_parse_key(
        "*14E65567ABDB5135D0CFD9A70B3032C179A49EE7", pk), -1);
}

/* The key derived from the password is the one the server stored. */
static void
test_ed25519_public_key(void **state)
{
    uint8_t stored[MDB_ED25519_KEY_LEN], pk[MDB_ED25519_KEY_LEN];

    (void)state;
    assert_int_equal(mdb_ed25519_parse_key(ED_STORED_X, stored), 0);
    assert_int_equal(mdb_ed25519_public_key("x", 1, pk), 0);
    assert_memory_equal(pk, stored, sizeof(pk));
    assert_int_equal(mdb_ed25519_public_key("y", 1, pk), 0);
    assert_memory_not_equal(pk, stored, sizeof(pk));
}

/*
 * A login the real server accepted: MariaDB 10.11's scramble for edvec
 * (password 'x') and the signature mdb_ed25519_sign made for it (PyMySQL
 * as the client with its ed25519 step replaced by this signer; the same
 * run with the password 'wrong' got 1045). Ed25519 being deterministic,
 * the signer must reproduce it byte for byte.
 */
static void
test_ed25519_server_accepted(void **state)
{
    size_t n, m;
    unsigned char *scramble = unhex(
        "199a28bc49eea6e7dceb6134a2622598e6f68cb43f89d891d788fc3d9093fd33",
        &n);
    unsigned char *want = unhex(
        "377d16fe324ff3135f71e51d21d0f5df70c19b930233967aa6c28f6012596f6c"
        "22999aa1380650cd35130da5413b045e9435666cee7ca9c1fc33ef61badcd500",
        &m);
    uint8_t pk[MDB_ED25519_KEY_LEN], sig[MDB_ED25519_SIG_LEN];

    (void)state;
    assert_int_equal(n, 32);
    assert_int_equal(m, MDB_ED25519_SIG_LEN);
    assert_int_equal(mdb_ed25519_sign("x", 1, scramble, n, sig), 0);
    assert_memory_equal(sig, want, sizeof(sig));
    assert_int_equal(mdb_ed25519_parse_key(ED_STORED_X, pk), 0);
    assert_true(mdb_ed25519_verify(pk, scramble, n, want, m));
    free(scramble);
    free(want);
}

/* What the signer produces, OpenSSL's verifier accepts under the stored
 * key; any changed bit of signature or message, another password, or a
 * wrong length is refused. */
static void
test_ed25519_sign_verify(void **state)
{
    const uint8_t *scramble =
        (const uint8_t *)"0123456789abcdefABCDEF#$%&()*+,-";
    uint8_t pk[MDB_ED25519_KEY_LEN];
    uint8_t sig[MDB_ED25519_SIG_LEN], sig2[MDB_ED25519_SIG_LEN];
    uint8_t msg[32];

    (void)state;
    assert_int_equal(mdb_ed25519_parse_key(ED_STORED_X, pk), 0);
    assert_int_equal(mdb_ed25519_sign("x", 1, scramble, 32, sig), 0);
    assert_true(mdb_ed25519_verify(pk, scramble, 32, sig, sizeof(sig)));
    /* deterministic, as Ed25519 is */
    assert_int_equal(mdb_ed25519_sign("x", 1, scramble, 32, sig2), 0);
    assert_memory_equal(sig, sig2, sizeof(sig));
    for (size_t i = 0; i < sizeof(sig); i += 7) {
        memcpy(sig2, sig, sizeof(sig));
        sig2[i] ^= 0x01;
        assert_false(mdb_ed25519_verify(pk, scramble, 32, sig2,
                                        sizeof(sig2)));
    }
    memcpy(msg, scramble, sizeof(msg));
    msg[31] ^= 0x80;
    assert_false(mdb_ed25519_verify(pk, msg, sizeof(msg), sig, sizeof(sig)));
    assert_false(mdb_ed25519_verify(pk, scramble, 32, sig, 63));
    assert_false(mdb_ed25519_verify(pk, scramble, 32, sig, 0));
    assert_int_equal(mdb_ed25519_sign("X", 1, scramble, 32, sig2), 0);
    assert_false(mdb_ed25519_verify(pk, scramble, 32, sig2, sizeof(sig2)));
    /* an empty password signs too (the key for '' differs) */
    assert_int_equal(mdb_ed25519_sign("", 0, scramble, 32, sig2), 0);
    assert_false(mdb_ed25519_verify(pk, scramble, 32, sig2, sizeof(sig2)));
}

/*
 * The server's AuthSwitchRequest to client_ed25519 carries 32 raw nonce
 * bytes without a terminator (this one, constructed, ends in a zero
 * byte): the data parser keeps them all; more than its room is an error,
 * not a truncation. The 20-byte parser is unchanged.
 */
static void
test_ed25519_switch_parse(void **state)
{
    unsigned char req[1 + 15 + 32];
    char plugin[MDB_PLUGIN_MAX];
    uint8_t data[33], small[MDB_SCRAMBLE_LEN];
    size_t n;

    (void)state;
    req[0] = 0xfe;
    memcpy(req + 1, "client_ed25519", 15);
    for (size_t i = 0; i < 32; i++) {
        req[16 + i] = (unsigned char)(i * 37 + 1);
    }
    req[16 + 31] = 0;
    assert_int_equal(mdb_parse_auth_switch_data(req, sizeof(req), plugin,
                                                data, sizeof(data), &n), 0);
    assert_string_equal(plugin, MDB_ED25519_CLIENT_PLUGIN);
    assert_int_equal(n, 32);
    assert_memory_equal(data, req + 16, 32);
    assert_int_equal(mdb_parse_auth_switch_data(req, sizeof(req), plugin,
                                                data, 31, &n), -1);
    assert_int_equal(mdb_parse_auth_switch_data(req, 10, plugin, data,
                                                sizeof(data), &n), 0);
    assert_int_equal(n, 0);   /* "client_e" running to the end: no data */
    assert_int_equal(mdb_parse_auth_switch_data(req + 1, 5, plugin, data,
                                                sizeof(data), &n), -1);
    assert_int_equal(mdb_parse_auth_switch(req, sizeof(req), plugin, small,
                                           &n), 0);
    assert_int_equal(n, MDB_SCRAMBLE_LEN);
}

/* Signing from SHA-512(password), what a session holds for a backend
 * ed25519 login, gives the signature the server accepted. */
static void
test_ed25519_sign_hash(void **state)
{
    size_t n, m;
    unsigned char *nonce = unhex(
        "199a28bc49eea6e7dceb6134a2622598e6f68cb43f89d891d788fc3d9093fd33",
        &n);
    unsigned char *want = unhex(
        "377d16fe324ff3135f71e51d21d0f5df70c19b930233967aa6c28f6012596f6c"
        "22999aa1380650cd35130da5413b045e9435666cee7ca9c1fc33ef61badcd500",
        &m);
    uint8_t hpw[MDB_ED25519_HASH_LEN], sig[MDB_ED25519_SIG_LEN];

    (void)state;
    assert_int_equal(mdb_ed25519_hash_password("x", 1, hpw), 0);
    assert_int_equal(mdb_ed25519_sign_hash(hpw, nonce, n, sig), 0);
    assert_memory_equal(sig, want, sizeof(sig));
    assert_int_equal(mdb_ed25519_hash_password("y", 1, hpw), 0);
    assert_int_equal(mdb_ed25519_sign_hash(hpw, nonce, n, sig), 0);
    assert_memory_not_equal(sig, want, sizeof(sig));
    free(nonce);
    free(want);
}

/* The ed25519 public key of a global_priv row: alone, in an auth_or list
 * (the first ed25519 alternative), absent for native rows, and not taken
 * from a malformed string. */
static void
test_global_priv_ed25519(void **state)
{
    struct mdb_users u = {0};
    uint8_t pk[MDB_ED25519_KEY_LEN];
    char row[512];

    (void)state;
    assert_int_equal(mdb_ed25519_parse_key(ED_STORED_X, pk), 0);
    snprintf(row, sizeof(row), "{\"plugin\":\"ed25519\","
             "\"authentication_string\":\"%s\"}", ED_STORED_X);
    assert_int_equal(mdb_users_add_priv(&u, "eonly", "%", row), 0);
    snprintf(row, sizeof(row), "{\"plugin\":\"mysql_native_password\","
             "\"authentication_string\":"
             "\"*E56A114692FE0DE073F9A1DD68A00EEB9703F3F1\","
             "\"auth_or\":[{\"plugin\":\"ed25519\","
             "\"authentication_string\":\"%s\"},{}]}", ED_STORED_X);
    assert_int_equal(mdb_users_add_priv(&u, "aor", "%", row), 0);
    assert_int_equal(mdb_users_add_priv(&u, "nat", "%",
                     "{\"plugin\":\"mysql_native_password\","
                     "\"authentication_string\":\"\"}"), 0);
    assert_int_equal(mdb_users_add_priv(&u, "bad", "%",
                     "{\"plugin\":\"ed25519\","
                     "\"authentication_string\":\"tooshort\"}"), 0);
    assert_int_equal(mdb_users_add(&u, "old", "%", ED_STORED_X, "ed25519"),
                     0);
    assert_true(u.v[0].ed25519 && !u.v[0].native);
    assert_memory_equal(u.v[0].ed_pk, pk, sizeof(pk));
    assert_true(u.v[1].ed25519 && u.v[1].native);
    assert_memory_equal(u.v[1].ed_pk, pk, sizeof(pk));
    assert_false(u.v[2].ed25519);
    assert_false(u.v[3].ed25519);
    assert_true(u.v[4].ed25519);
    assert_memory_equal(u.v[4].ed_pk, pk, sizeof(pk));
    mdb_users_free(&u);
}

/* pam accounts, from rows recorded from MariaDB 10.11: the service name
 * is the authentication_string ("mysql" when empty, as auth_pam), also
 * as an auth_or alternative beside a native password. */
static void
test_global_priv_pam(void **state)
{
    struct mdb_users u = {0};

    (void)state;
    assert_int_equal(mdb_users_add_priv(&u, "pamu", "%",
                     "{\"access\":0,\"version_id\":101119,\"plugin\":\"pam\","
                     "\"authentication_string\":\"sluice-test-manual\","
                     "\"password_last_changed\":1795545670}"), 0);
    assert_int_equal(mdb_users_add_priv(&u, "pamdef", "%",
                     "{\"access\":0,\"version_id\":101119,\"plugin\":\"pam\","
                     "\"authentication_string\":\"\","
                     "\"password_last_changed\":1795546238}"), 0);
    assert_int_equal(mdb_users_add_priv(&u, "pamor", "%",
                     "{\"access\":0,\"version_id\":101119,\"plugin\":"
                     "\"mysql_native_password\",\"authentication_string\":"
                     "\"*F33AE6DD04EF4C7C1D3105568E7FB7C1EE16C937\","
                     "\"auth_or\":[{\"plugin\":\"pam\","
                     "\"authentication_string\":\"svc1\"},{}],"
                     "\"password_last_changed\":1795546238}"), 0);
    assert_int_equal(mdb_users_add_priv(&u, "nat", "%",
                     "{\"plugin\":\"mysql_native_password\","
                     "\"authentication_string\":\"\"}"), 0);
    assert_int_equal(mdb_users_add(&u, "old", "%", "svc2", "pam"), 0);
    assert_true(u.v[0].pam && !u.v[0].native);
    assert_string_equal(u.v[0].pam_service, "sluice-test-manual");
    assert_true(u.v[1].pam);
    assert_string_equal(u.v[1].pam_service, "mysql");
    assert_true(u.v[2].pam && u.v[2].native && u.v[2].has_pw);
    assert_string_equal(u.v[2].pam_service, "svc1");
    assert_string_equal(u.v[2].plugins, "pam,mysql_native_password");
    assert_false(u.v[3].pam);
    assert_null(u.v[3].pam_service);
    assert_true(u.v[4].pam);
    assert_string_equal(u.v[4].pam_service, "svc2");
    mdb_users_free(&u);
}

/*
 * The dialog exchange, against packets recorded with MariaDB 10.11's
 * auth_pam and the mariadb CLI (libmariadb's dialog plugin):
 *
 *   server -> Sluice: fe "dialog" 00          (switch, no question)
 *   Sluice -> client: fe "dialog" 00 04 "Password: "
 *   client -> Sluice: "pam-secret" 00
 *   server -> Sluice: 04 "Password: " / 02 "Token: " (later questions)
 */
static void
test_dialog_exchange(void **state)
{
    static const unsigned char server_switch[] = {
        0xfe, 'd', 'i', 'a', 'l', 'o', 'g', 0x00,
    };
    static const unsigned char first_q[] = "\xfe" "dialog\0" "\x04"
                                           "Password: ";
    static const unsigned char answer[] = "pam-secret";  /* with its NUL */
    unsigned char out[64];
    char plugin[MDB_PLUGIN_MAX], a[MDB_PAM_ANSWER_MAX];
    uint8_t data[64];
    size_t n, alen;
    bool echo = true;

    (void)state;
    assert_int_equal(mdb_parse_auth_switch_data(server_switch,
                                                sizeof(server_switch), plugin,
                                                data, sizeof(data), &n), 0);
    assert_string_equal(plugin, MDB_DIALOG_PLUGIN);
    assert_int_equal(n, 0);

    n = mdb_dialog_question(out, sizeof(out), true, false, "Password: ", 10);
    assert_int_equal(n, sizeof(first_q) - 1);
    assert_memory_equal(out, first_q, n);
    n = mdb_dialog_question(out, sizeof(out), false, true, "Token: ", 7);
    assert_int_equal(n, 8);
    assert_memory_equal(out, "\x02Token: ", 8);
    assert_int_equal(mdb_dialog_question(out, 10, true, false, "Password: ",
                                         10), 0);

    assert_int_equal(mdb_dialog_answer(answer, sizeof(answer), a, sizeof(a),
                                       &alen), 0);
    assert_string_equal(a, "pam-secret");
    assert_int_equal(alen, 10);
    /* without the terminator, and empty */
    assert_int_equal(mdb_dialog_answer(answer, 10, a, sizeof(a), &alen), 0);
    assert_int_equal(alen, 10);
    assert_int_equal(mdb_dialog_answer((const unsigned char *)"", 1, a,
                                       sizeof(a), &alen), 0);
    assert_int_equal(alen, 0);
    /* hostile: a NUL inside, longer than the room */
    assert_int_equal(mdb_dialog_answer((const unsigned char *)"ab\0cd", 6,
                                       a, sizeof(a), &alen), -1);
    assert_int_equal(mdb_dialog_answer(answer, sizeof(answer), a, 10,
                                       &alen), -1);

    assert_int_equal(mdb_dialog_parse_question(
                         (const unsigned char *)"\x04Password: ", 11, &echo),
                     0);
    assert_false(echo);
    assert_int_equal(mdb_dialog_parse_question(
                         (const unsigned char *)"\x02Token: ", 8, &echo), 0);
    assert_true(echo);
    assert_int_equal(mdb_dialog_parse_question(
                         (const unsigned char *)"\x05", 1, &echo), 0);
    assert_false(echo);
    assert_int_equal(mdb_dialog_parse_question(
                         (const unsigned char *)"\x00", 1, &echo), -1);
    assert_int_equal(mdb_dialog_parse_question(
                         (const unsigned char *)"\x06x", 2, &echo), -1);
    assert_int_equal(mdb_dialog_parse_question(NULL, 0, &echo), -1);
}

/* The answers a session keeps for its backend logins. */
static void
test_pam_answers(void **state)
{
    char list[32] = "";
    size_t len = 0, alen = 0;
    const char *s;

    (void)state;
    assert_null(mdb_pam_answer_at(list, 0, 0, &alen));
    assert_int_equal(mdb_pam_answers_add(list, sizeof(list), &len, "pw", 2),
                     0);
    assert_int_equal(mdb_pam_answers_add(list, sizeof(list), &len, "", 0),
                     0);
    assert_int_equal(mdb_pam_answers_add(list, sizeof(list), &len, "123456",
                                         6), 0);
    assert_int_equal(len, 3 + 1 + 7);
    s = mdb_pam_answer_at(list, len, 0, &alen);
    assert_int_equal(alen, 2);
    assert_memory_equal(s, "pw", 2);
    s = mdb_pam_answer_at(list, len, 1, &alen);
    assert_int_equal(alen, 0);
    s = mdb_pam_answer_at(list, len, 2, &alen);
    assert_int_equal(alen, 6);
    assert_memory_equal(s, "123456", 6);
    /* beyond: the last one again */
    s = mdb_pam_answer_at(list, len, 9, &alen);
    assert_int_equal(alen, 6);
    assert_memory_equal(s, "123456", 6);
    /* refused: a NUL inside, no room */
    assert_int_equal(mdb_pam_answers_add(list, sizeof(list), &len, "a\0b", 3),
                     -1);
    assert_int_equal(mdb_pam_answers_add(list, sizeof(list), &len,
                                         "0123456789012345678901", 22), -1);
    assert_int_equal(len, 11);
    /* a list not terminated is no list */
    assert_null(mdb_pam_answer_at("abc", 3, 0, &alen));
}

/* Replaying a client's answers to a server's auth_pam: the server's bare
 * switch to dialog takes answer 0 at once; its first question then takes
 * answer 1, unless the client's own first question was echoed (then the
 * server discarded answer 0 and asks its first prompt itself). */
static void
test_pam_replay(void **state)
{
    static const char answers[] = "pw\0" "tok";
    struct mdb_pam_replay r = {0};
    size_t n;
    const char *a;

    (void)state;
    /* password, then an echoed token: the server asks "Token: " only */
    a = mdb_pam_replay(&r, answers, sizeof(answers), false,
                       MDB_PAM_SWITCH_DIALOG, NULL, 0, &n);
    assert_int_equal(n, 2);
    assert_memory_equal(a, "pw", 2);
    a = mdb_pam_replay(&r, answers, sizeof(answers), false,
                       MDB_PAM_QUESTION,
                       (const unsigned char *)"\x02Token: ", 8, &n);
    assert_int_equal(n, 3);
    assert_memory_equal(a, "tok", 3);
    /* an echoed first prompt: the server asks it, answer 0 again */
    memset(&r, 0, sizeof(r));
    mdb_pam_replay(&r, answers, sizeof(answers), true, MDB_PAM_SWITCH_DIALOG,
                   NULL, 0, &n);
    a = mdb_pam_replay(&r, answers, sizeof(answers), true, MDB_PAM_QUESTION,
                       (const unsigned char *)"\x02Name: ", 7, &n);
    assert_memory_equal(a, "pw", 2);
    a = mdb_pam_replay(&r, answers, sizeof(answers), true, MDB_PAM_QUESTION,
                       (const unsigned char *)"\x04Password: ", 11, &n);
    assert_memory_equal(a, "tok", 3);
    /* a switch that carries its question; cleartext */
    memset(&r, 0, sizeof(r));
    a = mdb_pam_replay(&r, answers, sizeof(answers), false,
                       MDB_PAM_SWITCH_DIALOG,
                       (const unsigned char *)"\x04Password: ", 11, &n);
    assert_memory_equal(a, "pw", 2);
    memset(&r, 0, sizeof(r));
    a = mdb_pam_replay(&r, answers, sizeof(answers), false,
                       MDB_PAM_SWITCH_CLEAR, NULL, 0, &n);
    assert_memory_equal(a, "pw", 2);
    /* not dialog, not a question, no answers */
    assert_null(mdb_pam_replay(&r, answers, sizeof(answers), false,
                               MDB_PAM_QUESTION,
                               (const unsigned char *)"\x04x", 2, &n));
    memset(&r, 0, sizeof(r));
    assert_null(mdb_pam_replay(&r, NULL, 0, false, MDB_PAM_SWITCH_DIALOG,
                               NULL, 0, &n));
    assert_null(mdb_pam_replay(&r, answers, sizeof(answers), false,
                               MDB_PAM_QUESTION,
                               (const unsigned char *)"\x00", 1, &n));
}

/* pam_mode=password_2FA: answers are (password, code), chosen by the
 * question's text (MaxScale's rule: "password" in it, any case). */
static void
test_pam_replay_2fa(void **state)
{
    static const char answers[] = "pw\0" "123456";
    struct mdb_pam_replay r = {.two_factor = true};
    size_t n;
    const char *a;

    (void)state;
    assert_true(mdb_pam_is_password_prompt("Password: ", 10));
    assert_true(mdb_pam_is_password_prompt("LDAP PASSWORD for x", 19));
    assert_false(mdb_pam_is_password_prompt("Verification code: ", 19));
    assert_false(mdb_pam_is_password_prompt("Passwor", 7));
    /* the server's bare switch: the password ahead; then "Token: " */
    a = mdb_pam_replay(&r, answers, sizeof(answers), false,
                       MDB_PAM_SWITCH_DIALOG, NULL, 0, &n);
    assert_int_equal(n, 2);
    assert_memory_equal(a, "pw", 2);
    a = mdb_pam_replay(&r, answers, sizeof(answers), false,
                       MDB_PAM_QUESTION,
                       (const unsigned char *)"\x02Token: ", 8, &n);
    assert_int_equal(n, 6);
    assert_memory_equal(a, "123456", 6);
    /* asked again for the password (any order): the password */
    a = mdb_pam_replay(&r, answers, sizeof(answers), false,
                       MDB_PAM_QUESTION,
                       (const unsigned char *)"\x04Password: ", 11, &n);
    assert_memory_equal(a, "pw", 2);
    /* a switch carrying a code question; cleartext: the password */
    memset(&r, 0, sizeof(r));
    r.two_factor = true;
    a = mdb_pam_replay(&r, answers, sizeof(answers), false,
                       MDB_PAM_SWITCH_DIALOG,
                       (const unsigned char *)"\x04OTP: ", 6, &n);
    assert_memory_equal(a, "123456", 6);
    a = mdb_pam_replay(&r, answers, sizeof(answers), false,
                       MDB_PAM_SWITCH_CLEAR, NULL, 0, &n);
    assert_memory_equal(a, "pw", 2);
    /* after cleartext no dialog question; not a question type */
    assert_null(mdb_pam_replay(&r, answers, sizeof(answers), false,
                               MDB_PAM_QUESTION,
                               (const unsigned char *)"\x04x", 2, &n));
    r.dialog = true;
    assert_null(mdb_pam_replay(&r, answers, sizeof(answers), false,
                               MDB_PAM_QUESTION,
                               (const unsigned char *)"\x00", 1, &n));
    assert_null(mdb_pam_replay(&r, NULL, 0, false, MDB_PAM_SWITCH_CLEAR,
                               NULL, 0, &n));
}

static void
usermap_bad(const char *text, const char *want)
{
    struct mdb_usermap m;
    char err[256] = "";

    assert_int_equal(mdb_usermap_parse(text, strlen(text), &m, err,
                                       sizeof(err)), -1);
    assert_non_null(strstr(err, want));
    assert_int_equal(m.n_map + m.n_creds, 0);
}

/* MaxScale's user_mapping_file: users mapped, credentials found by the
 * mapped name (none: NULL, an empty native password), and what is
 * refused with a reason. */
static void
test_usermap(void **state)
{
    static const char text[] =
        "{\"user_map\":[{\"original_user\":\"bob\",\"mapped_user\":\"app\"},"
        "{\"original_user\":\"eve\",\"mapped_user\":\"edapp\"},"
        "{\"original_user\":\"joe\",\"mapped_user\":\"nocred\"}],"
        "\"group_map\":[],"
        "\"server_credentials\":[{\"mapped_user\":\"app\","
        "\"password\":\"pw1\",\"plugin\":\"mysql_native_password\"},"
        "{\"mapped_user\":\"edapp\",\"password\":\"pw2\","
        "\"plugin\":\"ed25519\"}]}";
    struct mdb_usermap m;
    const struct mdb_usermap_cred *c;
    char err[256];

    (void)state;
    assert_int_equal(mdb_usermap_parse(text, strlen(text), &m, err,
                                       sizeof(err)), 0);
    assert_string_equal(mdb_usermap_find(&m, "bob", &c), "app");
    assert_non_null(c);
    assert_string_equal(c->password, "pw1");
    assert_false(c->ed25519);
    assert_string_equal(mdb_usermap_find(&m, "eve", &c), "edapp");
    assert_true(c->ed25519);
    assert_string_equal(mdb_usermap_find(&m, "joe", &c), "nocred");
    assert_null(c);
    assert_null(mdb_usermap_find(&m, "app", &c));
    assert_null(mdb_usermap_find(&m, "Bob", &c));
    mdb_usermap_free(&m);

    usermap_bad("[]", "not a JSON object");
    usermap_bad("{\"user_map\":", "not JSON");
    usermap_bad("{\"user_map\":{}}", "must be arrays");
    usermap_bad("{\"group_map\":[{\"original_group\":\"g\","
                "\"mapped_user\":\"u\"}]}", "group_map");
    usermap_bad("{\"user_map\":[{\"original_user\":\"a\"}]}",
                "original_user");
    usermap_bad("{\"user_map\":[{\"original_user\":\"\","
                "\"mapped_user\":\"b\"}]}", "original_user");
    usermap_bad("{\"server_credentials\":[{\"mapped_user\":\"a\","
                "\"password\":\"p\",\"plugin\":\"pam\"}]}", "plugin");
    usermap_bad("{\"server_credentials\":[{\"mapped_user\":\"a\","
                "\"password\":5}]}", "password");
}

/* ---- user_accounts_file (mdb_accfile.c) ---- */

struct seen {
    char names[8][64];
    int n;
    int fail_at;     /* the callback fails at this call (-1: never) */
};

static int
record(void *ctx, const struct mdb_accfile_user *u)
{
    struct seen *s = ctx;

    if (s->n == s->fail_at || s->n == 8) {
        return -1;
    }
    snprintf(s->names[s->n++], sizeof(s->names[0]), "%s@%s:%s:%s:%s:%d",
             u->user, u->host, u->password, u->plugin, u->auth_string,
             u->is_role);
    return 0;
}

static void
accfile_bad(const char *text, const char *want)
{
    struct seen s = {.fail_at = -1};
    char err[512] = "";

    assert_int_equal(mdb_accfile_parse(text, strlen(text), record, &s, err,
                                       sizeof(err)), -1);
    if (strstr(err, want) == NULL) {
        fail_msg("'%s' does not say '%s'", err, want);
    }
    assert_int_equal(s.n, 0);   /* nothing reached the callback */
}

/* MaxScale's user_accounts_file: every user entry reaches the callback
 * with absent strings as "", and each refusal says why (JSON position,
 * entry, field); a bad entry anywhere means no callback at all. */
static void
test_accfile(void **state)
{
    static const char text[] =
        "{\"user\":[{\"user\":\"a\",\"host\":\"%\","
        "\"password\":\"*14E65567ABDB5135D0CFD9A70B3032C179A49EE7\","
        "\"super_priv\":false,\"global_db_priv\":true,"
        "\"proxy_priv\":false,\"default_role\":\"r\"},"
        "{\"user\":\"e\",\"host\":\"10.0.%\",\"plugin\":\"ed25519\","
        "\"authentication_string\":\"key\"},"
        "{\"user\":\"r\",\"host\":\"\",\"is_role\":true}],"
        "\"db\":[{\"user\":\"a\",\"host\":\"%\",\"db\":\"test\"}],"
        "\"roles_mapping\":[{\"user\":\"a\",\"host\":\"%\",\"role\":\"r\"}]}";
    struct seen s = {.fail_at = -1};
    char err[512];

    (void)state;
    assert_int_equal(mdb_accfile_parse(text, strlen(text), record, &s, err,
                                       sizeof(err)), 0);
    assert_int_equal(s.n, 3);
    assert_string_equal(s.names[0], "a@%:*14E65567ABDB5135D0CFD9A70B3032C1"
                                    "79A49EE7:::0");
    assert_string_equal(s.names[1], "e@10.0.%::ed25519:key:0");
    assert_string_equal(s.names[2], "r@::::1");
    /* check only, and an empty object */
    assert_int_equal(mdb_accfile_parse(text, strlen(text), NULL, NULL, err,
                                       sizeof(err)), 0);
    assert_int_equal(mdb_accfile_parse("{}", 2, record, &s, err,
                                       sizeof(err)), 0);
    /* the callback's failure (out of memory) stops the parse */
    s = (struct seen){.fail_at = 1};
    assert_int_equal(mdb_accfile_parse(text, strlen(text), record, &s, err,
                                       sizeof(err)), -1);
    assert_string_equal(err, "out of memory");

    accfile_bad("{\"user\":[]", "invalid JSON at line 1 column 10");
    accfile_bad("{\n\"user\": [\n{\"user\":\"a\",}]}",
                "invalid JSON at line 3 column");
    accfile_bad("[]", "not a JSON object");
    accfile_bad("{\"user\":[],\"user\":[]}", "invalid JSON");  /* twice */
    accfile_bad("{\"users\":[]}", "unknown member \"users\"");
    accfile_bad("{\"db\":{}}", "\"db\" must be an array");
    accfile_bad("{\"user\":[{\"user\":\"a\",\"host\":\"%\"},5]}",
                "user[1] is not a JSON object");
    accfile_bad("{\"user\":[{\"host\":\"%\"}]}", "user[0]: \"user\" is "
                "missing");
    accfile_bad("{\"user\":[{\"user\":\"a\"}]}", "user[0]: \"host\" is "
                "missing");
    accfile_bad("{\"user\":[{\"user\":\"a\",\"host\":5}]}",
                "user[0]: \"host\" must be a string");
    accfile_bad("{\"user\":[{\"user\":\"a\",\"host\":\"%\","
                "\"is_role\":\"yes\"}]}", "\"is_role\" must be a boolean");
    accfile_bad("{\"user\":[{\"user\":\"a\",\"host\":\"%\","
                "\"pasword\":\"\"}]}", "unknown field \"pasword\"");
    accfile_bad("{\"user\":[{\"user\":\"a\",\"host\":\"%\","
                "\"password\":\"secret\"}]}", "mysql_native_password hash");
    accfile_bad("{\"user\":[{\"user\":\"a\",\"host\":\"%\","
                "\"password\":\"*14E65567ABDB5135D0CFD9A70B3032C179A49EEZ\"}]}",
                "mysql_native_password hash");
    accfile_bad("{\"user\":[{\"user\":\"a\",\"host\":\"%\","
                "\"authentication_string\":\"secret\"}]}",
                "mysql_native_password hash");
    accfile_bad("{\"db\":[{\"user\":\"a\",\"host\":\"%\"}]}",
                "db[0]: \"db\" is missing");
    accfile_bad("{\"roles_mapping\":[{\"user\":\"a\",\"host\":\"%\","
                "\"db\":\"x\"}]}", "roles_mapping[0]: unknown field \"db\"");
    /* a bad entry after good ones: still no callback */
    accfile_bad("{\"user\":[{\"user\":\"a\",\"host\":\"%\"}],"
                "\"db\":[{\"user\":\"a\"}]}", "db[0]: \"host\" is missing");
}

/* ---- caching_sha2_password ---- */

/*
 * Fast path, computed with Python hashlib (and PyMySQL's
 * scramble_caching_sha2 agrees):
 *   SHA256(b"secret") = 2bb80d537b1da3e38bd30361aa855686bde0eacd7162fef6a25fe97bf527a25b
 *   token over b"abcdefghijklmnopqrst"
 *                     = c76e2898612a4cf042c77fa8c4702c4c64c0c2c557c53c4d75595aaa6abae809
 */
static void
test_sha2_fast_path(void **state)
{
    const uint8_t *nonce = (const uint8_t *)"abcdefghijklmnopqrst";
    uint8_t h[MDB_SHA256_LEN], token[MDB_SHA256_LEN];
    size_t n;
    unsigned char *want_h = unhex(
        "2bb80d537b1da3e38bd30361aa855686bde0eacd7162fef6a25fe97bf527a25b",
        &n);
    unsigned char *want = unhex(
        "c76e2898612a4cf042c77fa8c4702c4c64c0c2c557c53c4d75595aaa6abae809",
        &n);

    (void)state;
    mdb_sha256_password("secret", 6, h);
    assert_memory_equal(h, want_h, MDB_SHA256_LEN);
    mdb_sha2_token(h, nonce, 20, token);
    assert_memory_equal(token, want, MDB_SHA256_LEN);
    assert_true(mdb_sha2_fast_check(want, 32, nonce, 20, h));
    /* another nonce, a flipped bit, a short or long token, another
     * password's hash: no */
    assert_false(mdb_sha2_fast_check(want, 32,
                                     (const uint8_t *)"abcdefghijklmnopqrsu",
                                     20, h));
    want[31] ^= 0x80;
    assert_false(mdb_sha2_fast_check(want, 32, nonce, 20, h));
    want[31] ^= 0x80;
    assert_false(mdb_sha2_fast_check(want, 31, nonce, 20, h));
    assert_false(mdb_sha2_fast_check(want, 0, nonce, 20, h));
    mdb_sha256_password("secreT", 6, h);
    assert_false(mdb_sha2_fast_check(want, 32, nonce, 20, h));
    free(want_h);
    free(want);
}

static void
test_native_check_password(void **state)
{
    uint8_t stored[20], sha1pw[20], want[20];

    (void)state;
    assert_int_equal(
        mdb_parse_stored("*14E65567ABDB5135D0CFD9A70B3032C179A49EE7", stored),
        1);
    assert_true(mdb_native_check_password((const uint8_t *)"secret", 6,
                                          true, stored, sha1pw));
    mdb_sha1("secret", 6, want);
    assert_memory_equal(sha1pw, want, 20);
    assert_false(mdb_native_check_password((const uint8_t *)"secreT", 6,
                                           true, stored, sha1pw));
    assert_false(mdb_native_check_password((const uint8_t *)"secret", 5,
                                           true, stored, sha1pw));
    assert_false(mdb_native_check_password((const uint8_t *)"", 0, true,
                                           stored, sha1pw));
    /* no password: only "" */
    assert_true(mdb_native_check_password((const uint8_t *)"", 0, false,
                                          stored, sha1pw));
    assert_false(mdb_native_check_password((const uint8_t *)"x", 1, false,
                                           stored, sha1pw));
}

/* A throwaway 1024-bit key (openssl genpkey) and what PyMySQL 1.0.2's
 * sha2_rsa_encrypt (the `cryptography` package, OAEP with SHA-1) sent
 * for the password "s3cr3t-pa55word" and nonce "abcdefghijklmnopqrst". */
static const char RSA_TEST_KEY[] =
    "-----BEGIN PRIVATE KEY-----\n"
    "MIICdgIBADANBgkqhkiG9w0BAQEFAASCAmAwggJcAgEAAoGBAKVeJ23f/9ACX4Gq\n"
    "AIE60HXtcGbaf11X6IJaKIXgmV3AifAckrv9yRDPrsWMT3NQ4loE0EZZAyT5bFgN\n"
    "efl6htPC5VIo5cEPHpmYJtmnPMDEpkDSR+9NgiZ9knj+Yz/lxhmth/OthfNPfV6W\n"
    "7aZ8WblRQYO8ZPQeitb94XuD9ne9AgMBAAECgYB0hQ0/TFBR3vowwPquFCUCkxVa\n"
    "Q6buvJxmDOT0wDcQajRHbbqun7nnEI9TPvRUiq+TQkUG7H1ctirzODuz3/PTa/XM\n"
    "b007hdEvQ5f/3gqAjYvUvrHLeGyaaLuvkRauwHVLyqUKsaWZrItqQ1XpHhgIgpIm\n"
    "D+kKix+tclTd0RjGeQJBANhDaP/i5EohRoVObQ+vgmut+V/VKLHs4dgsS4EtlaxX\n"
    "MtEQT45a50vTngouumfsEhUTz4KNNiKbIX19Jb6Sl98CQQDDwLiJB/Jtv7ou7ygX\n"
    "z2v2HH1GLD9C07VgbyVV4XprcA2zfoqM0nvGm+6/U34aQQXJQ4J50qDVhyaBbrN4\n"
    "09PjAkEAmvEhB0Qd32abyeJ4jOZoAJHyutBTibZ30JNbvT9VntYSmGqhNRK36EHD\n"
    "VvRHpTEje2poH9bgVEbk5a2GH1WT7QJAXBMIOZw9UZX/Exh2uUxdMbQQ0LL7Romi\n"
    "JKvi2dRm6qYYK7d3n+lZQwARenjhNaQj/pj8hCSodgdN+0+Ap3KrlQJAW154wADL\n"
    "v9pkDYxUci5RiLZd0HUdcmhQ99gjDP7YvLQYvTOX6V43HSQndNRBfY6p7nN42JOc\n"
    "2FANOFXKobCOEw==\n"
    "-----END PRIVATE KEY-----\n";
static const char RSA_TEST_CT[] =
    "0e2a6d009cc6f1960fe7d8b50426830f8153cd8eef727f24cf5593d7fcbce917"
    "877c7904a8982b5c16a3dff7240750b2afed311809a3334bdae74f4a1d096102"
    "5a9bf0c31d2bfecda538103a015112fdc8e45076df46a5891745e2b68b9fb99b"
    "2d81188d97304697bf89efd24d5dbebcb49d604ff0d38d490a15d60f2c164c3c";

static void
test_sha2_rsa_recorded(void **state)
{
    const uint8_t *nonce = (const uint8_t *)"abcdefghijklmnopqrst";
    BIO *b = BIO_new_mem_buf(RSA_TEST_KEY, -1);
    EVP_PKEY *key = PEM_read_bio_PrivateKey(b, NULL, NULL, NULL);
    size_t n, pw_len;
    unsigned char *ct = unhex(RSA_TEST_CT, &n);
    uint8_t pw[255];

    (void)state;
    BIO_free(b);
    assert_non_null(key);
    assert_int_equal(mdb_rsa_size(key), 128);
    assert_int_equal(n, 128);
    assert_int_equal(mdb_rsa_decrypt_password(key, ct, n, nonce, 20, pw,
                                              sizeof(pw), &pw_len), 0);
    assert_int_equal(pw_len, 15);
    assert_memory_equal(pw, "s3cr3t-pa55word", 15);
    /* another nonce (at the NUL's position 15): no NUL at the end */
    assert_int_equal(mdb_rsa_decrypt_password(
                         key, ct, n, (const uint8_t *)"abcdefghijklmnoXqrst",
                         20, pw, sizeof(pw), &pw_len), -1);
    /* too little room for it */
    assert_int_equal(mdb_rsa_decrypt_password(key, ct, n, nonce, 20, pw, 14,
                                              &pw_len), -1);
    /* a flipped bit, a byte short, all zeros */
    ct[64] ^= 1;
    assert_int_equal(mdb_rsa_decrypt_password(key, ct, n, nonce, 20, pw,
                                              sizeof(pw), &pw_len), -1);
    assert_int_equal(mdb_rsa_decrypt_password(key, ct, n - 1, nonce, 20, pw,
                                              sizeof(pw), &pw_len), -1);
    memset(ct, 0, n);
    assert_int_equal(mdb_rsa_decrypt_password(key, ct, n, nonce, 20, pw,
                                              sizeof(pw), &pw_len), -1);
    assert_int_equal(pw_len, 0);
    free(ct);
    EVP_PKEY_free(key);
}

/* Our own key pair: the PEM a client gets parses (as the client parses
 * it) and what is encrypted with it decrypts; a password with a NUL
 * inside is refused. */
static void
test_sha2_rsa_round_trip(void **state)
{
    const uint8_t *nonce = (const uint8_t *)"0123456789abcdefghij";
    struct evp_pkey_st *key = mdb_rsa_generate(2048);
    struct evp_pkey_st *pub;
    char pem[2048];
    size_t pem_len, n, pw_len;
    uint8_t ct[512], pw[255];
    char longpw[200];

    (void)state;
    assert_non_null(key);
    pem_len = mdb_rsa_public_pem(key, pem, sizeof(pem));
    assert_true(pem_len > 0);
    assert_true(strncmp(pem, "-----BEGIN PUBLIC KEY-----\n", 27) == 0);
    assert_int_equal(mdb_rsa_public_pem(key, pem, 100), 0);
    pem_len = mdb_rsa_public_pem(key, pem, sizeof(pem));
    pub = mdb_rsa_public_from_pem(pem, pem_len);
    assert_non_null(pub);
    assert_int_equal(mdb_rsa_size(pub), 256);
    n = mdb_rsa_encrypt_password(pub, "pw", 2, nonce, 20, ct, sizeof(ct));
    assert_int_equal(n, 256);
    assert_int_equal(mdb_rsa_decrypt_password(key, ct, n, nonce, 20, pw,
                                              sizeof(pw), &pw_len), 0);
    assert_int_equal(pw_len, 2);
    assert_memory_equal(pw, "pw", 2);
    /* longer than the nonce: it repeats */
    memset(longpw, 'q', sizeof(longpw));
    n = mdb_rsa_encrypt_password(pub, longpw, sizeof(longpw), nonce, 20, ct,
                                 sizeof(ct));
    assert_int_equal(n, 256);
    assert_int_equal(mdb_rsa_decrypt_password(key, ct, n, nonce, 20, pw,
                                              sizeof(pw), &pw_len), 0);
    assert_int_equal(pw_len, sizeof(longpw));
    assert_memory_equal(pw, longpw, sizeof(longpw));
    /* the empty password */
    n = mdb_rsa_encrypt_password(pub, "", 0, nonce, 20, ct, sizeof(ct));
    assert_int_equal(mdb_rsa_decrypt_password(key, ct, n, nonce, 20, pw,
                                              sizeof(pw), &pw_len), 0);
    assert_int_equal(pw_len, 0);
    /* a NUL inside */
    n = mdb_rsa_encrypt_password(pub, "a\0b", 3, nonce, 20, ct, sizeof(ct));
    assert_int_equal(mdb_rsa_decrypt_password(key, ct, n, nonce, 20, pw,
                                              sizeof(pw), &pw_len), -1);
    /* the public half cannot decrypt; no key at all */
    n = mdb_rsa_encrypt_password(pub, "pw", 2, nonce, 20, ct, sizeof(ct));
    assert_int_equal(mdb_rsa_decrypt_password(pub, ct, n, nonce, 20, pw,
                                              sizeof(pw), &pw_len), -1);
    assert_int_equal(mdb_rsa_decrypt_password(NULL, ct, n, nonce, 20, pw,
                                              sizeof(pw), &pw_len), -1);
    assert_null(mdb_rsa_public_from_pem("garbage", 7));
    mdb_rsa_free(pub);
    mdb_rsa_free(key);
}

/* The fast path's cache: found by account, useless once the account's
 * stored hash changes, least recently used evicted, swept after a load. */
static void
test_sha2_cache(void **state)
{
    struct mdb_sha2_cache c;
    struct mdb_users u = {0};
    const struct mdb_sha2_entry *e;
    uint8_t h[MDB_SHA256_LEN], sha1pw[MDB_SHA1_LEN];
    struct mdb_account *a, *b, *d;
    /* SHA1(SHA1(pw)) of "secret" */
    const char *secret = "*14E65567ABDB5135D0CFD9A70B3032C179A49EE7";

    (void)state;
    assert_int_equal(mdb_users_add(&u, "a", "%", secret, NULL), 0);
    assert_int_equal(mdb_users_add(&u, "b", "%", secret, NULL), 0);
    assert_int_equal(mdb_users_add(&u, "d", "10.%", secret, NULL), 0);
    assert_int_equal(mdb_users_add(&u, "e", "%", "", NULL), 0);
    a = &u.v[0];
    b = &u.v[1];
    d = &u.v[2];
    assert_int_equal(mdb_sha2_cache_init(&c, 2), 0);
    assert_null(mdb_sha2_cache_find(&c, a));
    assert_int_equal(mdb_sha2_cache_put(&c, a, (const uint8_t *)"secret",
                                        6), 0);
    e = mdb_sha2_cache_find(&c, a);
    assert_non_null(e);
    mdb_sha256_password("secret", 6, h);
    assert_memory_equal(e->sha256pw, h, MDB_SHA256_LEN);
    mdb_sha1("secret", 6, sha1pw);
    assert_memory_equal(e->sha1pw, sha1pw, MDB_SHA1_LEN);
    /* the same user at another host is another account */
    assert_null(mdb_sha2_cache_find(&c, d));
    /* full: the least recently used (a was used after b was put) goes */
    assert_int_equal(mdb_sha2_cache_put(&c, b, (const uint8_t *)"secret",
                                        6), 0);
    assert_non_null(mdb_sha2_cache_find(&c, a));
    assert_int_equal(mdb_sha2_cache_put(&c, d, (const uint8_t *)"secret",
                                        6), 0);
    assert_int_equal(c.n, 2);
    assert_null(mdb_sha2_cache_find(&c, b));
    assert_non_null(mdb_sha2_cache_find(&c, a));
    assert_non_null(mdb_sha2_cache_find(&c, d));
    /* a's password changed: its entry is wiped when met */
    a->stored[0] ^= 1;
    assert_null(mdb_sha2_cache_find(&c, a));
    assert_int_equal(c.n, 1);
    a->stored[0] ^= 1;
    assert_null(mdb_sha2_cache_find(&c, a));
    /* a put again replaces, not adds */
    assert_int_equal(mdb_sha2_cache_put(&c, a, (const uint8_t *)"secret",
                                        6), 0);
    assert_int_equal(mdb_sha2_cache_put(&c, a, (const uint8_t *)"secret",
                                        6), 0);
    assert_int_equal(c.n, 2);
    /* a load: d is gone, a's hash changed -> both wiped */
    d->user[0] = 'x';
    a->stored[5] ^= 0x10;
    mdb_sha2_cache_sweep(&c, &u);
    assert_int_equal(c.n, 0);
    /* an account without password is never served from the cache */
    assert_int_equal(mdb_sha2_cache_put(&c, b, (const uint8_t *)"secret",
                                        6), 0);
    b->has_pw = false;
    assert_null(mdb_sha2_cache_find(&c, b));
    mdb_sha2_cache_free(&c);
    assert_int_equal(c.n, 0);
    assert_null(c.v);
    mdb_users_free(&u);
}

int
main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_token_vector),
        cmocka_unit_test(test_parse_stored),
        cmocka_unit_test(test_real_login),
        cmocka_unit_test(test_login_with_db),
        cmocka_unit_test(test_truncated),
        cmocka_unit_test(test_ssl_request_and_garbage),
        cmocka_unit_test(test_build_round_trips),
        cmocka_unit_test(test_auth_switch_parse),
        cmocka_unit_test(test_host_match),
        cmocka_unit_test(test_account_order),
        cmocka_unit_test(test_global_priv_auth_or),
        cmocka_unit_test(test_global_priv_odd_rows),
        cmocka_unit_test(test_scramble),
        cmocka_unit_test(test_account_requirements),
        cmocka_unit_test(test_kill_parse),
        cmocka_unit_test(test_ed25519_parse_key),
        cmocka_unit_test(test_ed25519_public_key),
        cmocka_unit_test(test_ed25519_sign_verify),
        cmocka_unit_test(test_ed25519_server_accepted),
        cmocka_unit_test(test_ed25519_switch_parse),
        cmocka_unit_test(test_ed25519_sign_hash),
        cmocka_unit_test(test_global_priv_ed25519),
        cmocka_unit_test(test_usermap),
        cmocka_unit_test(test_accfile),
        cmocka_unit_test(test_sha2_fast_path),
        cmocka_unit_test(test_native_check_password),
        cmocka_unit_test(test_sha2_rsa_recorded),
        cmocka_unit_test(test_sha2_rsa_round_trip),
        cmocka_unit_test(test_sha2_cache),
        cmocka_unit_test(test_global_priv_pam),
        cmocka_unit_test(test_dialog_exchange),
        cmocka_unit_test(test_pam_answers),
        cmocka_unit_test(test_pam_replay),
        cmocka_unit_test(test_pam_replay_2fa),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
