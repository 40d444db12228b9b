/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target: a listener's user_mapping_file (mdb_usermap.c), which
 * an operator writes and Sluice re-reads while it runs. Any text must
 * give a map or an error with a reason, never a crash or a leak; a map
 * is searched for a few users and every mapping found must name a
 * mapped user (and credentials for that very user, when any).
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
    static const char *const users[] = {"a", "bob", "", "root"};
    struct mdb_usermap m;
    const struct mdb_usermap_cred *c;
    char err[256] = "";

    if (mdb_usermap_parse((const char *)data, size, &m, err,
                          sizeof(err)) != 0) {
        if (err[0] == '\0' || m.n_map != 0 || m.n_creds != 0) {
            abort();   /* an error says why and leaves nothing */
        }
        return 0;
    }
    for (size_t i = 0; i < sizeof(users) / sizeof(users[0]); i++) {
        const char *to = mdb_usermap_find(&m, users[i], &c);

        if ((to == NULL && c != NULL) ||
            (to != NULL && (to[0] == '\0' ||
                            (c != NULL && strcmp(c->user, to) != 0)))) {
            abort();
        }
    }
    mdb_usermap_free(&m);
    return 0;
}
