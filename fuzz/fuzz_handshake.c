/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target: the login parsers of untrusted input — a client's
 * HandshakeResponse41 / SSLRequest (and its connect attributes), and on
 * the backend side the server's Handshake v10 and AuthSwitchRequest.
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
    return 0;
}
