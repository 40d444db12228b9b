/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Switching a DCB to the compressed protocol (mdb_zcodec.c).
 */
#ifndef MDB_ZCODEC_H
#define MDB_ZCODEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "mdb_compress.h"

struct sl_dcb;

/*
 * From now on, dcb's bytes in both directions are compressed packets
 * (called right after the handshake response was read or written).
 * client_role: dcb is a backend connection (Sluice is the client). seq:
 * the compressed sequence number of the first packet Sluice sends if it
 * sends before it reads (the number after the handshake response's).
 * max_pending: see mdb_z_new. *zs (may be NULL) gets the state, for
 * mdb_z_command / mdb_z_answer_starts; it lives as long as the DCB. 0, or
 * -1 (out of memory, or bytes already
 * queued were refused; the caller closes the DCB).
 */
int mdb_compress_start(struct sl_dcb *dcb, enum mdb_zalgo algo, int level,
                       bool client_role, uint8_t seq, size_t max_pending,
                       struct mdb_zstate **zs);

#endif
