/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The reply tracker: follows a backend's answers packet by packet so the
 * proxy knows what each answer is and when it is complete, without copying
 * payloads. The backend side feeds it the first MDB_PEEK bytes of every
 * packet and the packet's length.
 *
 * Every command sent that expects an answer is pushed on a FIFO
 * (mdb_tracker_expect); answers arrive in the same order.
 *
 *   START --0x00--> OK (more results? START : DONE)
 *         --0xFF--> ERR (DONE)
 *         --0xFB--> LOAD_DATA (client sends a file) --> START (OK/ERR)
 *         --n-->    COLDEF x n --> [COLDEF_EOF] --> ROWS
 *                   ROWS --row--> ROWS
 *                        --0xFE, len < 0xFFFFFF--> (more ? START : DONE)
 *                        --0xFF--> DONE
 *   COM_STMT_PREPARE: 0x00 stmt_id cols params --> PARAMS x p [EOF]
 *                     --> COLS x c [EOF] --> DONE
 *   COM_FIELD_LIST:   COLDEF ... --0xFE--> DONE
 *   COM_STATISTICS:   one string --> DONE
 *   COM_STMT_FETCH:   ROWS directly
 *
 * EOF packets after column/parameter definitions are absent when
 * CLIENT_DEPRECATE_EOF was negotiated; terminators are then OK packets
 * with a 0xFE header. A packet of exactly 0xFFFFFF bytes continues in the
 * next one; continuations are never looked at.
 *
 * Context: one tracker per backend connection, worker-owned.
 */
#ifndef MDB_REPLY_H
#define MDB_REPLY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <sluice/reply.h>

/* Bytes of a packet's payload the tracker may look at. */
#define MDB_PEEK 32

enum mdb_trk_rc {
    MDB_TRK_MORE = 0,        /* the answer goes on */
    MDB_TRK_DONE = 1,        /* this packet completed the answer */
    MDB_TRK_UNEXPECTED = 2,  /* a packet no command asked for */
};

struct mdb_tracker {
    uint32_t caps;           /* negotiated capabilities */
    uint8_t *q;              /* ring of commands awaiting an answer */
    size_t qcap;
    size_t qhead;
    size_t qlen;
    struct sl_reply reply;   /* the current (or last) answer */
    uint8_t phase;           /* internal state (mdb_reply.c) */
    bool active;             /* an answer is being tracked */
    bool cont;               /* the next packet continues a 16 MiB one */
    uint64_t left;           /* definitions still expected */
    uint16_t prep_cols;      /* COM_STMT_PREPARE: columns after params */
};

void mdb_tracker_init(struct mdb_tracker *t, uint32_t caps);
void mdb_tracker_free(struct mdb_tracker *t);
/* Does the server answer this command at all? */
bool mdb_expects_reply(uint8_t cmd);
/* Record a command sent to the server; no-op for commands without an
 * answer. 0 or -1 on allocation failure. */
int mdb_tracker_expect(struct mdb_tracker *t, uint8_t cmd);
/* Answers still outstanding (the current one included). */
size_t mdb_tracker_pending(const struct mdb_tracker *t);
/*
 * Feed one packet: its payload length and the first min(len, MDB_PEEK)
 * bytes of its payload in p[0..avail). Returns enum mdb_trk_rc; t->reply
 * describes the answer so far (for MDB_TRK_UNEXPECTED: that packet alone).
 */
int mdb_tracker_packet(struct mdb_tracker *t, uint32_t len,
                       const unsigned char *p, size_t avail);

#endif
