/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The reply tracker's view of a backend's answer, as routers and filters see
 * it. The backend protocol fills it while the answer streams in; a reply can
 * reach the router in several pieces (client_reply is called per chunk of
 * complete packets) and `complete` is set on the last piece.
 *
 *   START -> OK | ERR                                        (done)
 *   START -> RSET_COLDEF -> [COLDEF_EOF] -> RSET_ROWS -> terminator
 *         -> (more results? back to START : done)
 *   START -> PREPARE (params, columns, EOFs)                 (done)
 *   START -> LOAD_DATA (0xFB: client sends the file) -> OK|ERR (done)
 */
#ifndef SLUICE_REPLY_H
#define SLUICE_REPLY_H

#include <sluice/ccdefs.h>

enum sl_reply_state {
    SL_REPLY_START = 0,
    SL_REPLY_DONE,
    SL_REPLY_RSET_COLDEF,
    SL_REPLY_RSET_COLDEF_EOF,
    SL_REPLY_RSET_ROWS,
    SL_REPLY_PREPARE,
    SL_REPLY_LOAD_DATA,     /* server asked for a LOCAL INFILE's contents */
};

/* The reason a backend protocol gives sl_backend_failed() (as its
 * prefix) when a server's answers cannot be followed any more (a packet
 * out of sequence inside an answer): the stream is lost, not the server. */
#define SL_REPLY_LOST_TRACK "Lost track of the server's answers"

struct sl_reply {
    uint8_t command;          /* the command this answers (COM_*) */
    uint8_t state;            /* enum sl_reply_state */
    bool complete;            /* the whole answer (all results) has arrived */
    bool is_ok;               /* last result was an OK packet */
    bool is_err;              /* last result was an ERR packet */
    bool more_results;        /* SERVER_MORE_RESULTS_EXIST seen */
    uint8_t last_seq;         /* sequence number of its last packet so far:
                               * an error made up in the middle of an
                               * answer follows it */
    uint16_t error_code;      /* when is_err */
    char sqlstate[6];         /* when is_err, NUL-terminated */
    uint16_t server_status;   /* from the last OK/EOF */
    uint16_t warnings;
    uint32_t results;         /* result sets + OKs seen so far */
    uint64_t rows;            /* rows of the current result set */
    uint64_t field_count;     /* columns of the current result set */
    uint64_t affected_rows;   /* from the last OK */
    uint64_t last_insert_id;  /* from the last OK */
    uint32_t stmt_id;         /* COM_STMT_PREPARE: the server's id */
    uint16_t param_count;     /* COM_STMT_PREPARE */
    uint64_t bytes;           /* bytes of this answer so far */
};

#endif
