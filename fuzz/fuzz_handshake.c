/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target: the login parsers of untrusted input — a client's
 * HandshakeResponse41 / SSLRequest (and its connect attributes), and on
 * the backend side the server's Handshake v10 and AuthSwitchRequest;
 * for PAM accounts, a client's answer to a dialog question (or its
 * mysql_clear_password packet), a server's dialog question, the list
 * of answers a session keeps for its backend logins and their replay.
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "mdb_parse.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The dialog parsers: an answer that is accepted is a NUL-free string
 * that fits, and every answer kept comes back as it was. */
static void
pam(const uint8_t *data, size_t size)
{
    char a[MDB_PAM_ANSWER_MAX];
    char list[MDB_PAM_ANSWERS_MAX];
    size_t alen = 0, len = 0, got = 0, kept = 0;
    bool echo;
    const char *back;

    mdb_dialog_parse_question(data, size, &echo);
    if (mdb_dialog_answer(data, size, a, sizeof(a), &alen) == 0 &&
        (alen >= sizeof(a) || strlen(a) != alen)) {
        abort();
    }
    /* the input cut at each 0x01 into answers */
    for (size_t i = 0, start = 0; i <= size; i++) {
        if (i == size || data[i] == 0x01) {
            if (mdb_pam_answers_add(list, sizeof(list), &len,
                                    (const char *)data + start,
                                    i - start) == 0) {
                back = mdb_pam_answer_at(list, len, kept, &got);
                if (back == NULL || got != i - start ||
                    memcmp(back, data + start, got) != 0) {
                    abort();
                }
                kept++;
            }
            start = i + 1;
        }
    }
    if (len > sizeof(list)) {
        abort();
    }
    /* the replay to a server's auth_pam: the input as its steps */
    {
        struct mdb_pam_replay r = {0};
        const char *ans;

        for (size_t i = 0; i + 1 < size; i += 2) {
            ans = mdb_pam_replay(&r, list, len, data[0] & 1,
                                 (enum mdb_pam_step)(data[i] % 3),
                                 data + i + 1, size - i - 1, &got);
            if (ans != NULL &&
                (ans < list || ans + got >= list + len || ans[got] != '\0')) {
                abort();   /* an answer is inside the list, terminated */
            }
        }
    }
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct mdb_hello h;
    struct mdb_server_hello sh;
    char plugin[MDB_PLUGIN_MAX];
    uint8_t scr[MDB_SCRAMBLE_LEN];
    uint8_t nonce[MDB_ED25519_NONCE_LEN + 1];
    size_t n;
    const unsigned char *v;
    size_t vlen;

    if (mdb_parse_hello(data, size, &h) == 0 && h.attrs != NULL) {
        mdb_attrs_find(h.attrs, h.attrs_len, "program_name", &v, &vlen);
        mdb_attrs_find(h.attrs, h.attrs_len, "zzz", &v, &vlen);
    }
    if (size > 0) {
        mdb_parse_change_user(data, size, (uint32_t)data[0] * 0x01010101u,
                              &h);
    }
    mdb_parse_server_hello(data, size, &sh);
    mdb_parse_auth_switch(data, size, plugin, scr, &n);
    if (mdb_parse_auth_switch_data(data, size, plugin, nonce, sizeof(nonce),
                                   &n) == 0 && n > sizeof(nonce)) {
        abort();
    }
    pam(data, size);
    return 0;
}
