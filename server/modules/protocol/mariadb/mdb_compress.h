/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The MariaDB protocol's compressed framing (CLIENT_COMPRESS: zlib, and
 * MySQL 8.0.18's CLIENT_ZSTD_COMPRESSION_ALGORITHM: zstd). Every byte
 * after the handshake response travels in compressed packets:
 *
 *   3 bytes  length of the payload as sent (little endian)
 *   1 byte   compressed sequence number
 *   3 bytes  length of the payload uncompressed; 0 = sent uncompressed
 *   payload  a zlib stream / a zstd frame (or the bytes themselves)
 *
 * The payloads, concatenated, are the ordinary packet stream: a logical
 * packet may span compressed packets and one compressed packet may hold
 * several logical packets, so decoding and encoding work on the byte
 * stream and never look at logical packets (except to see a new command
 * start, below).
 *
 * Sequence numbers: a compressed packet carries the sequence number after
 * the last one received (or sent) in the same exchange; a client starts
 * each command at 0. Sluice's client side (server role) answers with the
 * number after the last it read; its backend side (client role) starts at
 * 0 whenever a write begins a command (a logical packet numbered 0).
 *
 * Context: one state per DCB, used only by its owner worker; no locks.
 * Pure code on sl_buf chains (unit tests and the fuzz target link it).
 */
#ifndef MDB_COMPRESS_H
#define MDB_COMPRESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct sl_buf;

#define MDB_Z_HDR_LEN 7
/* Largest payload of one compressed packet (both length fields). */
#define MDB_Z_MAX_PAYLOAD 0xffffffu
/* Below this many bytes a payload is sent uncompressed (MariaDB's own
 * threshold: the zlib overhead would exceed the gain). */
#define MDB_Z_MIN_COMPRESS 50
/* MySQL 8's CLIENT_ZSTD_COMPRESSION_ALGORITHM capability bit. */
#define MDB_CAP_ZSTD (1u << 26)

enum mdb_zalgo {
    MDB_Z_ZLIB,
    MDB_Z_ZSTD,
};

/* Why decoding refused its input (mdb_z_decode). */
enum mdb_zerr {
    MDB_ZERR_NONE,
    MDB_ZERR_CORRUPT,   /* bad zlib/zstd data, or lengths that disagree */
    MDB_ZERR_TOO_BIG,   /* more decoded bytes than the limit allows */
    MDB_ZERR_NOMEM,
};

struct mdb_zstate;

/*
 * A state for one connection. level: zlib 1..9 (or -1 for the default),
 * zstd 1..22 (0: zstd's default). client_role: Sluice is the client (the
 * backend side: commands restart the sequence). seq: the sequence number
 * of the first compressed packet Sluice sends if it speaks first (the
 * number after the plain handshake response). max_pending: decoding
 * refuses to leave more than this many decoded bytes unconsumed in its
 * output (a decompression bomb; 0 = no limit). NULL on allocation failure.
 */
struct mdb_zstate *mdb_z_new(enum mdb_zalgo algo, int level,
                             bool client_role, uint8_t seq,
                             size_t max_pending);
void mdb_z_free(struct mdb_zstate *z);

/*
 * Decode the complete compressed packets at the head of raw (consumed)
 * onto the tail of out. Incomplete packets stay in raw. 0, or -1 with
 * mdb_z_error() saying why (the connection must close: the stream cannot
 * be resynchronised).
 */
int mdb_z_decode(struct mdb_zstate *z, struct sl_buf *raw, struct sl_buf *out);
enum mdb_zerr mdb_z_error(const struct mdb_zstate *z);
/* The sequence number the next compressed packet sent will carry. */
uint8_t mdb_z_next_seq(const struct mdb_zstate *z);

/*
 * Pipelined commands (server role). The server answers each command with
 * the compressed sequence number after that command's own last one, not
 * after the last one read: a client that sends COM_STMT_PREPARE and
 * COM_STMT_EXECUTE at once (Connector/J) expects both answers to start
 * at 1. The decoder notes, per run of compressed packets starting at 0
 * (a command), the number after its last; the protocol calls
 * mdb_z_command for each command it takes from the stream (in order;
 * expects_reply: whether an answer will come) and mdb_z_answer_starts
 * before writing the first bytes of an answer, which then continues that
 * command's numbering. Without these calls (or past MDB_Z_RUNS commands
 * in flight) the numbering continues from the last packet read.
 */
#define MDB_Z_RUNS 64
void mdb_z_command(struct mdb_zstate *z, bool expects_reply);
void mdb_z_answer_starts(struct mdb_zstate *z);

/*
 * Encode in (a heap chain, taken) into a new heap chain of compressed
 * packets (payloads of at most MDB_Z_MAX_PAYLOAD bytes; a payload that
 * does not shrink is sent as it is). NULL on allocation failure (in is
 * freed).
 */
struct sl_buf *mdb_z_encode(struct mdb_zstate *z, struct sl_buf *in);

#endif
