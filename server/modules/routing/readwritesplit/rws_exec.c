/* SPDX-License-Identifier: Apache-2.0 */
/*
 * readwritesplit's rewriting of client COM_STMT_* packets (pure packet
 * logic, no session): the statement id replaced for the connection a
 * command goes to, and the parameter types added to a COM_STMT_EXECUTE
 * for a connection that has not seen them (the client sends them only
 * with the first execution). The input is the client's packet, untrusted:
 * every length is checked against what the buffer holds.
 *
 * Also compiled into test/unit/test_rwsplit_exec.c and
 * fuzz/fuzz_rws_exec.c.
 *
 * Context: worker-owned (the buffers and the statement are the session's).
 */
#include <stdlib.h>
#include <string.h>

#include <sluice/buf.h>
#include <sluice/mariadb.h>

#include "rws.h"

/*
 * A COM_STMT_* command carrying backend id bid: a fresh copy of the first
 * 9 bytes (header, command, id) followed by the rest of buf's blocks,
 * shared, not copied (executes go out on every statement; the client's
 * own chain keeps its id for retries). NULL on allocation failure.
 */
struct sl_buf *
rws_exec_with_id(const struct sl_buf *buf, uint32_t bid)
{
    unsigned char head[9];
    struct sl_buf *out;
    struct sl_buf rest = {0};

    if (sl_buf_copy_out(buf, 0, sizeof(head), head) != sizeof(head)) {
        return NULL;
    }
    sl_mdb_put_le32(head + 5, bid);
    out = sl_buf_from(head, sizeof(head));
    if (out == NULL || sl_buf_clone(buf, &rest) != 0) {
        sl_buf_reset(&rest);
        sl_buf_free(out);
        return NULL;
    }
    sl_buf_consume(&rest, sizeof(head));
    sl_buf_append(out, &rest);
    return out;
}

/* Offset of an execute's "new params bound" flag: after the header,
 * command, id, flags, iteration count and the NULL bitmap. */
size_t
rws_exec_flag_off(uint16_t params)
{
    return 4 + 1 + 4 + 1 + 4 + ((size_t)params + 7) / 8;
}

/* Rebuild an execute whose "new params bound" flag is 0 so it carries the
 * parameter types (the server has not seen them on this connection). */
struct sl_buf *
rws_exec_add_types(const struct sl_buf *exec, const struct rws_ps *ps)
{
    size_t off = rws_exec_flag_off(ps->params);
    size_t len = sl_buf_len(exec);
    size_t tl = 2 * (size_t)ps->params;
    unsigned char *out;
    struct sl_buf *pkt;

    if (len <= off || sl_buf_byte(exec, off) != 0 || ps->types == NULL ||
        ps->ntypes != ps->params || len - 4 >= SL_MDB_MAX_PAYLOAD ||
        (out = malloc(len + tl)) == NULL) {
        return NULL;
    }
    sl_buf_copy_out(exec, 4, off - 4, out);
    out[off - 4] = 1;
    memcpy(out + off - 3, ps->types, tl);
    sl_buf_copy_out(exec, off + 1, len - off - 1, out + off - 3 + tl);
    pkt = sl_mdb_make_packet(0, out, len - 4 + tl);
    free(out);
    return pkt;
}

/* Remember the parameter types of an execute that carries them. */
void
rws_exec_save_types(const struct sl_buf *exec, struct rws_ps *ps)
{
    size_t off = rws_exec_flag_off(ps->params);
    size_t tl = 2 * (size_t)ps->params;

    if (ps->params == 0 || sl_buf_len(exec) < off + 1 + tl ||
        sl_buf_byte(exec, off) != 1) {
        return;
    }
    if (ps->types != NULL && ps->ntypes != ps->params) {
        free(ps->types);   /* sized for another count: never write past */
        ps->types = NULL;
    }
    if (ps->types == NULL && (ps->types = malloc(tl)) == NULL) {
        return;
    }
    ps->ntypes = ps->params;
    sl_buf_copy_out(exec, off + 1, tl, ps->types);
    ps->types_sent = 0;
}

