/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Protocol compression on a DCB: mdb_compress.c's framing installed as
 * the DCB's codec (sl_dcb_set_codec), so that the client and backend
 * code, the routers and the reply tracking all see the plain packet
 * stream. Refused input (bad zlib/zstd data, lengths that disagree, a
 * decompression bomb) closes only its own connection; a client is told
 * why first, as the server would tell it (1157 / 1153, 08S01).
 *
 * Context: the DCB's owner worker.
 */
#include <stdlib.h>

#include <sluice/buf.h>
#include <sluice/dcb.h>
#include <sluice/log.h>
#include <sluice/mariadb.h>
#include <sluice/session.h>

#include "mdb_compress.h"
#include "mdb_zcodec.h"

struct zcodec {
    struct mdb_zstate *z;
    struct sl_dcb *dcb;
    bool client_role;
};

static int
zc_decode(void *ctx, struct sl_buf *raw, struct sl_buf *out)
{
    struct zcodec *c = ctx;
    struct sl_buf *err;
    enum mdb_zerr why;
    struct sl_session *ses;

    if (mdb_z_decode(c->z, raw, out) == 0) {
        return 0;
    }
    why = mdb_z_error(c->z);
    ses = sl_dcb_session(c->dcb);
    sl_log_warn("%s %s%s%s sent %s; closing it",
                c->client_role ? "server" : "client",
                ses != NULL ? sl_session_user(ses) : "",
                ses != NULL ? "@" : "", sl_dcb_remote(c->dcb),
                why == MDB_ZERR_TOO_BIG
                    ? "compressed packets decompressing to more than "
                      "max_allowed_packet"
                    : why == MDB_ZERR_NOMEM
                          ? "compressed packets that could not be "
                            "decompressed (out of memory)"
                          : "a corrupt compressed packet");
    if (!c->client_role) {
        err = why == MDB_ZERR_TOO_BIG
                  ? sl_mdb_make_err(mdb_z_next_seq(c->z), 1153, "08S01",
                                    "Got a packet bigger than "
                                    "'max_allowed_packet' bytes")
                  : sl_mdb_make_err(mdb_z_next_seq(c->z), 1157, "08S01",
                                    "Couldn't uncompress communication "
                                    "packet");
        if (err != NULL) {
            sl_dcb_write(c->dcb, err);
        }
    }
    return -1;
}

static struct sl_buf *
zc_encode(void *ctx, struct sl_buf *in)
{
    struct zcodec *c = ctx;

    return mdb_z_encode(c->z, in);
}

static void
zc_free(void *ctx)
{
    struct zcodec *c = ctx;

    mdb_z_free(c->z);
    free(c);
}

static const struct sl_dcb_codec zcodec_ops = {
    .decode = zc_decode,
    .encode = zc_encode,
    .free = zc_free,
};

int
mdb_compress_start(struct sl_dcb *dcb, enum mdb_zalgo algo, int level,
                   bool client_role, uint8_t seq, size_t max_pending,
                   struct mdb_zstate **zs)
{
    struct zcodec *c = calloc(1, sizeof(*c));

    if (c == NULL ||
        (c->z = mdb_z_new(algo, level, client_role, seq, max_pending)) ==
            NULL) {
        free(c);
        sl_log_error("no memory for protocol compression on %s",
                     sl_dcb_remote(dcb));
        return -1;
    }
    c->dcb = dcb;
    c->client_role = client_role;
    if (zs != NULL) {
        *zs = c->z;
    }
    return sl_dcb_set_codec(dcb, &zcodec_ops, c) == 0 ? 0 : -1;
}
