/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target: a mysql.global_priv row's JSON (mdb_priv.c) as the
 * account loader decodes it — plugin, authentication_string, auth_or
 * lists, REQUIRE clause, limits. The text comes from a backend, so a
 * damaged or hostile table must give an account that no password matches
 * or one with the row's native password, never a crash or a leak; the
 * account is then looked up and checked with a native token (and, with
 * an ed25519 key, a signature).
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "mdb_parse.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const uint8_t scramble[MDB_SCRAMBLE_LEN] = "abcdefghijklmnopqrst";
    struct mdb_users u = {0};
    const struct mdb_account *a;
    uint8_t token[MDB_SHA1_LEN] = {0};
    uint8_t rec[MDB_SHA1_LEN];
    char *text = malloc(size + 1);

    if (text == NULL) {
        return 0;
    }
    memcpy(text, data, size);
    text[size] = '\0';
    if (mdb_users_add_priv(&u, "u", "%", text) == 0 && u.n == 1) {
        mdb_users_sort(&u);
        a = mdb_users_find(&u, "u", "127.0.0.1", false);
        if (a == NULL || (a->plugins != NULL && a->plugins[0] == '\0')) {
            abort();   /* the one account, with a name list or none */
        }
        if (a->native) {
            (void)mdb_native_check(token, sizeof(token), scramble,
                                   a->has_pw, a->stored, rec);
        }
        if (a->ed25519) {
            uint8_t sig[MDB_ED25519_SIG_LEN] = {0};

            /* a key from the row: OpenSSL must refuse, never crash */
            if (mdb_ed25519_verify(a->ed_pk, scramble, sizeof(scramble),
                                   sig, sizeof(sig))) {
                abort();
            }
        }
    }
    mdb_users_free(&u);
    free(text);
    return 0;
}
