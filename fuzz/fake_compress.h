/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Stand-in for mdb_zcodec.c in the state-machine fuzz targets, which
 * #include mdb_client.c or mdb_backend.c and fake the core: installing a
 * codec needs the real DCB layer. A negotiated compression is accepted
 * and the connection goes on uncompressed (no state: cl->z stays NULL);
 * the codec itself is fuzzed by fuzz_decompress.
 */
#ifndef FAKE_COMPRESS_H
#define FAKE_COMPRESS_H

#include "mdb_zcodec.h"

int
mdb_compress_start(struct sl_dcb *dcb, enum mdb_zalgo algo, int level,
                   bool client_role, uint8_t seq, size_t max_pending,
                   struct mdb_zstate **zs)
{
    if (zs != NULL) {
        *zs = NULL;
    }
    return 0;
}

#endif
