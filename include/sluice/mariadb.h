/* SPDX-License-Identifier: Apache-2.0 */
/*
 * MariaDB/MySQL client-server protocol facts and packet helpers on buffer
 * chains, shared by the protocol module, routers and filters. Implemented
 * in libsluice (server/core/mariadb_packet.c).
 *
 * A packet is a 3-byte little-endian payload length, a 1-byte sequence
 * number and the payload. A payload of exactly 0xFFFFFF bytes continues in
 * the next packet; a command (or row) ends with the first packet shorter
 * than that (possibly empty).
 *
 * Context: pure functions, any thread.
 */
#ifndef SLUICE_MARIADB_H
#define SLUICE_MARIADB_H

#include <sluice/buf-t.h>
#include <sluice/ccdefs.h>

#define SL_MDB_HDR_LEN 4u
#define SL_MDB_MAX_PAYLOAD 0xffffffu

/* Commands. */
enum {
    SL_COM_SLEEP = 0x00,
    SL_COM_QUIT = 0x01,
    SL_COM_INIT_DB = 0x02,
    SL_COM_QUERY = 0x03,
    SL_COM_FIELD_LIST = 0x04,
    SL_COM_CREATE_DB = 0x05,
    SL_COM_DROP_DB = 0x06,
    SL_COM_REFRESH = 0x07,
    SL_COM_SHUTDOWN = 0x08,
    SL_COM_STATISTICS = 0x09,
    SL_COM_PROCESS_INFO = 0x0a,
    SL_COM_CONNECT = 0x0b,
    SL_COM_PROCESS_KILL = 0x0c,
    SL_COM_DEBUG = 0x0d,
    SL_COM_PING = 0x0e,
    SL_COM_TIME = 0x0f,
    SL_COM_DELAYED_INSERT = 0x10,
    SL_COM_CHANGE_USER = 0x11,
    SL_COM_BINLOG_DUMP = 0x12,
    SL_COM_TABLE_DUMP = 0x13,
    SL_COM_CONNECT_OUT = 0x14,
    SL_COM_REGISTER_SLAVE = 0x15,
    SL_COM_STMT_PREPARE = 0x16,
    SL_COM_STMT_EXECUTE = 0x17,
    SL_COM_STMT_SEND_LONG_DATA = 0x18,
    SL_COM_STMT_CLOSE = 0x19,
    SL_COM_STMT_RESET = 0x1a,
    SL_COM_SET_OPTION = 0x1b,
    SL_COM_STMT_FETCH = 0x1c,
    SL_COM_DAEMON = 0x1d,
    SL_COM_BINLOG_DUMP_GTID = 0x1e,
    SL_COM_RESET_CONNECTION = 0x1f,
    SL_COM_STMT_BULK_EXECUTE = 0xfa,
};

/* Capability flags (lower 32 bits); MariaDB extended ones are << 32. */
enum {
    SL_CAP_LONG_PASSWORD = 1u << 0,
    SL_CAP_FOUND_ROWS = 1u << 1,
    SL_CAP_LONG_FLAG = 1u << 2,
    SL_CAP_CONNECT_WITH_DB = 1u << 3,
    SL_CAP_NO_SCHEMA = 1u << 4,
    SL_CAP_COMPRESS = 1u << 5,
    SL_CAP_ODBC = 1u << 6,
    SL_CAP_LOCAL_FILES = 1u << 7,
    SL_CAP_IGNORE_SPACE = 1u << 8,
    SL_CAP_PROTOCOL_41 = 1u << 9,
    SL_CAP_INTERACTIVE = 1u << 10,
    SL_CAP_SSL = 1u << 11,
    SL_CAP_IGNORE_SIGPIPE = 1u << 12,
    SL_CAP_TRANSACTIONS = 1u << 13,
    SL_CAP_RESERVED = 1u << 14,
    SL_CAP_SECURE_CONNECTION = 1u << 15,
    SL_CAP_MULTI_STATEMENTS = 1u << 16,
    SL_CAP_MULTI_RESULTS = 1u << 17,
    SL_CAP_PS_MULTI_RESULTS = 1u << 18,
    SL_CAP_PLUGIN_AUTH = 1u << 19,
    SL_CAP_CONNECT_ATTRS = 1u << 20,
    SL_CAP_PLUGIN_AUTH_LENENC_DATA = 1u << 21,
    SL_CAP_CAN_HANDLE_EXPIRED_PASSWORDS = 1u << 22,
    SL_CAP_SESSION_TRACK = 1u << 23,
    SL_CAP_DEPRECATE_EOF = 1u << 24,
};
/* MariaDB's extended capabilities live in the upper 32 bits of
 * sl_session_client_caps(): MARIADB_CLIENT_EXTENDED_METADATA (column
 * definitions carry a format, e.g. json). */
#define SL_CAP_MARIADB_EXTENDED_METADATA (1ull << 35)

/* Server status flags (OK / EOF packets). */
enum {
    SL_SERVER_STATUS_IN_TRANS = 0x0001,
    SL_SERVER_STATUS_AUTOCOMMIT = 0x0002,
    SL_SERVER_MORE_RESULTS_EXIST = 0x0008,
    SL_SERVER_STATUS_CURSOR_EXISTS = 0x0040,
    SL_SERVER_STATUS_LAST_ROW_SENT = 0x0080,
    SL_SERVER_STATUS_IN_TRANS_READONLY = 0x2000,
    SL_SERVER_SESSION_STATE_CHANGED = 0x4000,
};

/* Payload length from a 4-byte header. */
static inline uint32_t
sl_mdb_get_len(const unsigned char *hdr)
{
    return (uint32_t)hdr[0] | ((uint32_t)hdr[1] << 8) |
           ((uint32_t)hdr[2] << 16);
}

/* Little-endian stores of protocol integers (int<2>, int<4>). */
static inline void
sl_mdb_put_le16(unsigned char *p, uint16_t v)
{
    p[0] = (unsigned char)v;
    p[1] = (unsigned char)(v >> 8);
}

static inline void
sl_mdb_put_le32(unsigned char *p, uint32_t v)
{
    p[0] = (unsigned char)v;
    p[1] = (unsigned char)(v >> 8);
    p[2] = (unsigned char)(v >> 16);
    p[3] = (unsigned char)(v >> 24);
}

static inline void
sl_mdb_set_hdr(unsigned char *hdr, uint32_t len, uint8_t seq)
{
    hdr[0] = (unsigned char)len;
    hdr[1] = (unsigned char)(len >> 8);
    hdr[2] = (unsigned char)(len >> 16);
    hdr[3] = seq;
}

/*
 * Framing on chains, without copying payloads. Each returns the length in
 * bytes (headers included) of the first complete unit at the head of buf,
 * or 0 when more bytes are needed.
 *   packet:  one packet
 *   command: a packet and all its continuations (payload == 0xFFFFFF)
 */
SL_EXPORT size_t sl_mdb_packet_len(const struct sl_buf *buf);
SL_EXPORT size_t sl_mdb_command_len(const struct sl_buf *buf);
/* Total bytes of the complete packets at the head of buf (0 if none). */
SL_EXPORT size_t sl_mdb_complete_packets_len(const struct sl_buf *buf,
                                             size_t *npackets);

/* The command byte of a command chain (first payload byte), or -1. */
SL_EXPORT int sl_mdb_command(const struct sl_buf *buf);

/* Length-encoded integers: decode from p[0..avail); returns the bytes used,
 * or 0 when avail is too short or the prefix is invalid (0xFB, 0xFF). */
SL_EXPORT size_t sl_mdb_get_lenenc(const unsigned char *p, size_t avail,
                                   uint64_t *out);
/* Encode v at p (room for 9 bytes); returns the bytes written. */
SL_EXPORT size_t sl_mdb_put_lenenc(unsigned char *p, uint64_t v);

/* Build packet(s) carrying payload with sequence numbers from seq on,
 * splitting at 0xFFFFFF (an exact multiple gets an empty final packet).
 * NULL on allocation failure. */
SL_EXPORT struct sl_buf *sl_mdb_make_packet(uint8_t seq, const void *payload,
                                            size_t len);
/* ERR packet: 0xFF, code, '#', sqlstate (5 chars), message. */
SL_EXPORT struct sl_buf *sl_mdb_make_err(uint8_t seq, uint16_t code,
                                         const char *sqlstate,
                                         const char *msg);
/* OK packet. */
SL_EXPORT struct sl_buf *sl_mdb_make_ok(uint8_t seq, uint64_t affected,
                                        uint64_t insert_id, uint16_t status,
                                        uint16_t warnings);
/* A COM_QUERY command for sql (split over packets when large). */
SL_EXPORT struct sl_buf *sl_mdb_make_query(const char *sql, size_t len);

/*
 * A complete text result set, as a filter answering a query itself sends
 * it: the column count, one VARCHAR (utf8) column definition per name, the
 * EOF after the definitions unless deprecate_eof, nrows rows of ncols
 * values each (values is row-major, ncols * nrows entries; NULL is SQL
 * NULL) and the terminator (EOF, or the 0xFE OK packet when
 * deprecate_eof). Sequence numbers run from seq (1 for an answer to a
 * command). deprecate_eof must match what the client negotiated: see
 * sl_session_client_caps(). status goes into the terminator (e.g.
 * SL_SERVER_STATUS_AUTOCOMMIT). NULL when ncols is 0 or on allocation
 * failure. Any thread.
 */
SL_EXPORT struct sl_buf *sl_mdb_make_resultset(uint8_t seq,
                                               bool deprecate_eof,
                                               uint16_t status, size_t ncols,
                                               const char *const *names,
                                               size_t nrows,
                                               const char *const *values);

/*
 * The same for a client with capabilities client_caps (what
 * sl_session_client_caps() returns): the EOF follows SL_CAP_DEPRECATE_EOF
 * and the column definitions carry an empty extended-metadata field when
 * the client negotiated SL_CAP_MARIADB_EXTENDED_METADATA. Use this one:
 * sl_mdb_make_resultset() cannot answer an extended-metadata client.
 */
SL_EXPORT struct sl_buf *sl_mdb_make_resultset_for(
    uint8_t seq, uint64_t client_caps, uint16_t status, size_t ncols,
    const char *const *names, size_t nrows, const char *const *values);

/* Parse an ERR payload (starting at the 0xFF byte). true if well formed. */
SL_EXPORT bool sl_mdb_parse_err(const unsigned char *payload, size_t len,
                                uint16_t *code, char sqlstate[6],
                                const char **msg, size_t *msg_len);

#endif
