#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Write the hand-made seed inputs of fuzz_client_sm and fuzz_backend_sm.

    fuzz/sm_seeds.py [FUZZ_DIR]      (default: the directory of this file)

Each seed is a realistic exchange in the targets' event format (see the
comments at the top of fuzz/fuzz_client_sm.c and fuzz/fuzz_backend_sm.c):
a config byte, then events of an op byte, and for data events a length
byte and the bytes. Packets longer than 255 bytes are cut over several
events, as socket reads would cut them.
"""
import os
import struct
import sys

# capability bits (include/sluice/mariadb.h)
LONG_PASSWORD = 1
FOUND_ROWS = 2
CONNECT_WITH_DB = 8
PROTOCOL_41 = 0x200
SSL = 0x800
TRANSACTIONS = 0x2000
SECURE_CONNECTION = 0x8000
MULTI_STATEMENTS = 0x10000
MULTI_RESULTS = 0x20000
PLUGIN_AUTH = 0x80000
CONNECT_ATTRS = 0x100000
PLUGIN_AUTH_LENENC = 0x200000
DEPRECATE_EOF = 0x1000000

CLIENT_CAPS = (LONG_PASSWORD | FOUND_ROWS | PROTOCOL_41 | TRANSACTIONS |
               SECURE_CONNECTION | MULTI_STATEMENTS | MULTI_RESULTS |
               PLUGIN_AUTH | CONNECT_ATTRS | PLUGIN_AUTH_LENENC)
NATIVE = b"mysql_native_password"
TOKEN = bytes(range(1, 21))


def packet(seq, payload):
    return struct.pack("<I", len(payload))[:3] + bytes([seq]) + payload


def lenenc_str(b):
    assert len(b) < 251
    return bytes([len(b)]) + b


def data_events(op, data):
    out = b""
    for i in range(0, len(data), 255):
        chunk = data[i:i + 255]
        out += bytes([op, len(chunk)]) + chunk
    return out


def client(data):
    return data_events(0, data)


def backend(data):
    return data_events(1, data)


def server(data):
    return data_events(0, data)


def command(payload):
    return data_events(1, payload)


READY = b"\x02"
CLOSE = b"\x07"


def hello(seq=1, user=b"app", token=TOKEN, db=b"", plugin=NATIVE,
          caps=CLIENT_CAPS, attrs=True):
    if db:
        caps |= CONNECT_WITH_DB
    p = struct.pack("<IIB", caps, 16 * 1024 * 1024, 33) + b"\0" * 23
    p += user + b"\0" + lenenc_str(token)
    if db:
        p += db + b"\0"
    p += plugin + b"\0"
    if attrs:
        kv = lenenc_str(b"_client_name") + lenenc_str(b"libmariadb")
        kv += lenenc_str(b"program_name") + lenenc_str(b"mysql")
        p += lenenc_str(kv)
    return packet(seq, p)


def ssl_request(caps=CLIENT_CAPS | SSL):
    return packet(1, struct.pack("<IIB", caps, 16 * 1024 * 1024, 33) +
                  b"\0" * 23)


def query(sql, seq=0):
    return packet(seq, b"\x03" + sql)


def ok(seq, status=2):
    return packet(seq, b"\x00\x00\x00" + struct.pack("<HH", status, 0))


def err(seq, code, state, msg):
    return packet(seq, b"\xff" + struct.pack("<H", code) + b"#" + state + msg)


def eof(seq, status=2):
    return packet(seq, b"\xfe\x00\x00" + struct.pack("<H", status))


def coldef(seq, name):
    p = b"".join(lenenc_str(x) for x in
                 (b"def", b"", b"", b"", name, b""))
    p += b"\x0c" + struct.pack("<HIBHB", 33, 11, 8, 0x81, 0) + b"\0\0"
    return packet(seq, p)


def resultset(values, deprecate_eof=False):
    out = packet(1, b"\x01") + coldef(2, b"x")
    seq = 3
    if not deprecate_eof:
        out += eof(seq)
        seq += 1
    for v in values:
        out += packet(seq, lenenc_str(v))
        seq += 1
    if deprecate_eof:
        out += packet(seq, b"\xfe\x00\x00\x02\x00\x00\x00")
    else:
        out += eof(seq)
    return out


def change_user(user=b"other", token=TOKEN, db=b"test", plugin=NATIVE):
    p = b"\x11" + user + b"\0" + bytes([len(token)]) + token + db + b"\0"
    p += struct.pack("<H", 33) + plugin + b"\0"
    return packet(0, p)


def server_hello(caps=0xFFFF | (CLIENT_CAPS & ~0xFFFF) | DEPRECATE_EOF,
                 plugin=NATIVE, scramble=b"abcdefghijklmnopqrst"):
    p = b"\x0a" + b"10.11.6-MariaDB\0" + struct.pack("<I", 42)
    p += scramble[:8] + b"\0" + struct.pack("<H", caps & 0xFFFF)
    p += bytes([33]) + struct.pack("<HH", 2, caps >> 16) + bytes([21])
    p += b"\0" * 10 + scramble[8:] + b"\0" + plugin + b"\0"
    return packet(0, p)


def auth_switch(seq, plugin=NATIVE, data=b"ABCDEFGHIJKLMNOPQRST"):
    return packet(seq, b"\xfe" + plugin + b"\0" + data + b"\0")


def client_seeds():
    login = client(hello()) + READY
    q1 = query(b"SELECT 1")
    return {
        "login_query": b"\x00" + login + client(q1) +
        backend(resultset([b"1"])) + CLOSE,
        "login_db_deprecate_eof": b"\x10" + client(hello(db=b"test")) +
        READY + client(q1) + backend(resultset([b"1"], True)) +
        client(packet(0, b"\x01")),
        "auth_switch": b"\x00" +
        client(hello(token=b"\x01" * 32, plugin=b"caching_sha2_password")) +
        client(packet(3, TOKEN)) + READY + client(q1) + backend(ok(1)),
        "change_user": b"\x00" + login + client(change_user()) +
        backend(ok(1)) + client(query(b"SELECT DATABASE()")) +
        backend(resultset([b"test"])),
        "change_user_switch": b"\x00" + login +
        client(change_user(token=b"", plugin=b"client_ed25519")) +
        client(packet(3, TOKEN)) + backend(ok(2)) + client(q1) +
        backend(ok(1)),
        "ssl_request": b"\x03" + client(ssl_request()) +
        client(hello(seq=2, caps=CLIENT_CAPS | SSL)) + READY + client(q1) +
        backend(ok(1)),
        "pipelined": b"\x00" + login +
        client(query(b"SET @a=1") + query(b"USE test") +
               query(b"SELECT @a") + packet(0, b"\x0e")) +
        backend(ok(1) + ok(1) + resultset([b"1"]) + ok(1)) + CLOSE,
        "parked_reload": b"\x00" + b"\x13" + client(hello()) + b"\x03" +
        b"\x04" + READY + client(q1) + backend(ok(1)),
        "denied": b"\x00" + b"\x0b" + client(hello()),
        "refused_change_user": b"\x00" + login + b"\x1b" +
        client(change_user()),
        "local_infile": b"\x00" + login +
        client(query(b"LOAD DATA LOCAL INFILE 'x' INTO TABLE t")) +
        backend(packet(1, b"\xfbx")) +
        client(packet(2, b"1,2\n3,4\n") + packet(3, b"")) + backend(ok(4)),
        "backend_error": b"\x00" + login + client(q1) + b"\x05" +
        client(q1) + backend(err(1, 1064, b"42000", b"syntax")),
        "too_big": b"\x08" + login + client(query(b"x" * 100)),
        # the account cache asks for client_ed25519 (verdict ok, op bit
        # 7): switch at seq 2, the signature at 3, OK at 4
        # caching_sha2_password: the fast path (ok: 0x03, OK at 3)
        "sha2_fast": b"\x00" +
        client(hello(token=b"\x05" * 32, plugin=b"caching_sha2_password")) +
        READY + client(q1) + backend(ok(1)),
        # no token: switched to caching_sha2_password at 2, token at 3
        "sha2_no_token": b"\x00" +
        client(hello(token=b"", plugin=b"caching_sha2_password")) +
        client(packet(3, b"\x05" * 32)) + READY + client(q1) +
        backend(ok(1)),
        # full authentication (verdict op bit 5): over TLS the password
        "sha2_full_tls": b"\x03" + b"\x23" + client(ssl_request()) +
        client(hello(seq=2, caps=CLIENT_CAPS | SSL, token=b"\x05" * 32,
                     plugin=b"caching_sha2_password")) +
        client(packet(4, b"secret\0")) + READY + client(q1) +
        backend(ok(1)),
        # plain: 0x02 for the key at 3, the key at 4, an RSA answer at 5
        "sha2_rsa": b"\x00" + b"\x23" +
        client(hello(token=b"\x05" * 32, plugin=b"caching_sha2_password")) +
        client(packet(3, b"\x02")) + client(packet(5, bytes(range(128)))) +
        READY + client(q1) + backend(ok(1)),
        # plain: the password in clear (refused)
        "sha2_clear_on_plain": b"\x00" + b"\x23" +
        client(hello(token=b"\x05" * 32, plugin=b"caching_sha2_password")) +
        client(packet(3, b"secret\0")),
        "ed25519_switch": b"\x00" + b"\x83" + client(hello()) +
        client(packet(3, b"S" * 64)) + READY + client(q1) + backend(ok(1)),
        "ed25519_change_user": b"\x00" + login + b"\x83" +
        client(change_user()) + client(packet(2, b"S" * 64)) +
        backend(ok(3)) + client(q1) + backend(ok(1)),
        # right signature, no backend credential (refused, op bit 7)
        "ed25519_no_credential": b"\x00" + b"\x9b" + client(hello()),
        # a PAM account (config bit 5): the conversation's question goes
        # out at seq 2 (a resume event delivers it), the answer comes at
        # 3, its end (the next resume) logs in with OK at 4
        "pam_dialog": b"\x20" + b"\x03" + client(hello()) + b"\x04" +
        client(packet(3, b"pam-secret\0")) + b"\x04" + READY +
        client(q1) + backend(ok(1)),
        "pam_wrong": b"\x20" + b"\x03" + client(hello()) + b"\x04" +
        client(packet(3, b"\0")) + b"\x04",
        "pam_no_thread": b"\x60" + b"\x03" + client(hello()),
        "pam_gone": b"\x20" + b"\x03" + client(hello()) + b"\x04",
        # pam_mode=password_2FA with pam_backend_map=mariadb (config bit
        # 7): the password answers the switch's question, the code the
        # second one; then the conversation, then the mapped login
        "pam_2fa_map": b"\xa0" + b"\x03" + client(hello()) +
        client(packet(3, b"pam-secret\0")) + b"\x04" +
        client(packet(5, b"123456\0")) + b"\x04" + b"\x04" + READY +
        client(q1) + backend(ok(1)),
        "parked_flood": b"\x00" + b"\x13" + client(hello()) +
        data_events(8, b"\x03SELECT 1;" * 25),
    }


def backend_seeds():
    greet = server_hello()
    login_ok = server(greet) + server(ok(2))
    q1 = packet(0, b"\x03SELECT 1")[4:]
    return {
        "login_query": b"\x02" + login_ok + command(q1) +
        server(resultset([b"1"], True)) + b"\x02\x04",
        "queued_before_login": b"\x06" + command(q1) +
        command(b"\x03SELECT 2") + server(greet) + server(ok(2)) +
        server(resultset([b"1"], True) + resultset([b"2"], True)),
        "auth_switch": b"\x02" + server(greet) +
        server(auth_switch(2)) + server(ok(4)) + command(q1) +
        server(ok(1)),
        # auth_or (ed25519 OR mysql_native_password): the server tries
        # ed25519, Sluice declines it, then the native alternative
        "auth_or_ed25519": b"\x02" + server(greet) +
        server(auth_switch(2, b"client_ed25519", b"E" * 32)) +
        server(auth_switch(4)) + server(ok(6)) + command(q1) +
        server(ok(1)),
        "change_user_ed25519": b"\x02" + login_ok +
        command(change_user()[4:]) +
        server(auth_switch(1, b"client_ed25519", b"E" * 32)) +
        server(auth_switch(3)) + server(ok(5)) + command(q1) +
        server(ok(1)),
        "login_error": b"\x02" + server(greet) +
        server(err(2, 1045, b"28000", b"Access denied")),
        "tls": b"\x03" + server(greet) + server(ok(3)) + command(q1) +
        server(ok(1)),
        "tls_injected": b"\x03" + server(greet + ok(2)),
        "tls_unsupported": b"\x03" +
        server(server_hello(caps=0xF7FF | (CLIENT_CAPS & ~0xFFFF))),
        "change_user": b"\x02" + login_ok +
        command(change_user()[4:]) + server(auth_switch(1)) +
        server(ok(3)) + command(q1) + server(ok(1)),
        "pipelined_eof": b"\x00" +
        server(server_hello(caps=0xFFFF | (CLIENT_CAPS & ~0xFFFF))) +
        server(ok(2)) + command(q1) + command(q1) + command(b"\x0e") +
        server(resultset([b"1"]) + resultset([b"1"])) + server(ok(1)),
        "local_infile": b"\x02" + login_ok +
        command(b"\x03LOAD DATA LOCAL INFILE 'x' INTO TABLE t") +
        server(packet(1, b"\xfbx")) + command(b"1,2\n") + command(b"") +
        server(ok(4)) + b"\x04",
        "error_closes": b"\x0a" + login_ok + command(q1) +
        server(err(1, 1146, b"42S02", b"no such table")),
        "big_resultset": b"\x02" + login_ok + command(q1) +
        server(packet(1, b"\x01") + coldef(2, b"x")) +
        data_events(8, packet(3, lenenc_str(b"row" * 20)) * 3) +
        server(packet(4, b"\xfe\x00\x00\x02\x00\x00\x00")),
        # auth_pam: dialog without a question (the first answer goes
        # ahead), then a second question as a plain packet
        "pam_dialog": b"\x12" + server(greet) +
        server(auth_switch(2, b"dialog", b"")) +
        server(packet(4, b"\x02Token: ")) + server(ok(6)) + command(q1) +
        server(ok(1)),
        "pam_clear": b"\x12" + server(greet) +
        server(auth_switch(2, b"mysql_clear_password", b"")) +
        server(ok(4)),
        "server_refuses": b"\x00" +
        server(err(0, 1040, b"08004", b"Too many connections")),
    }


# A 1024-bit RSA public key as a MySQL 8 server sends it after 0x02.
RSA_PEM = (b"-----BEGIN PUBLIC KEY-----\n"
           b"MIGfMA0GCSqGSIb3DQEBAQUAA4GNADCBiQKBgQDrFrESsLCin1Z7A7FaSo+14pS8\n"
           b"FKAH2vcF5N+Akv95QQzG8vVc/V5VRdKDv5OHd18UzMf+ivUgBvOie1u+3KvZtBLN\n"
           b"HFr7Sn4+jxKZCUdIb/242/dyfjJL3U1rff8zl65LcF8cxV4r6ZmqMlZEkf3LSlbW\n"
           b"1lGQjaZJ03Af1rcjFwIDAQAB\n"
           b"-----END PUBLIC KEY-----\n")
SHA2 = b"caching_sha2_password"


def sha2_seeds():
    """caching_sha2_password toward a MySQL 8 server (config bit 5: the
    session holds SHA-256 and the password in clear; bit 6 unix)."""
    greet = server_hello(plugin=SHA2)
    q1 = packet(0, b"\x03SELECT 1")[4:]
    return {
        "sha2_fast": b"\x22" + server(greet) + server(packet(2, b"\x01\x03")) +
        server(ok(3)) + command(q1) + server(ok(1)),
        "sha2_switch_fast": b"\x22" + server(server_hello()) +
        server(auth_switch(2, SHA2)) + server(packet(4, b"\x01\x03")) +
        server(ok(5)),
        "sha2_full_tls": b"\x23" + server(greet) +
        server(packet(3, b"\x01\x04")) + server(ok(5)) + command(q1) +
        server(ok(1)),
        "sha2_full_unix": b"\x62" + server(greet) +
        server(packet(2, b"\x01\x04")) + server(ok(4)),
        "sha2_full_rsa": b"\x22" + server(greet) +
        server(packet(2, b"\x01\x04")) +
        server(packet(4, b"\x01" + RSA_PEM)) + server(ok(6)) +
        command(q1) + server(ok(1)),
        "sha2_bad_key": b"\x22" + server(greet) +
        server(packet(2, b"\x01\x04")) +
        server(packet(4, b"\x01" + RSA_PEM[:90])),
        "sha2_no_credential": b"\x02" + server(server_hello()) +
        server(auth_switch(2, SHA2)),
        "sha2_change_user": b"\x22" + server(server_hello()) +
        server(ok(2)) + command(change_user()[4:]) +
        server(auth_switch(1, SHA2)) + server(packet(3, b"\x01\x04")) +
        server(packet(5, b"\x01" + RSA_PEM)) + server(ok(7)) +
        command(q1) + server(ok(1)),
        "sha2_err": b"\x22" + server(greet) +
        server(err(2, 1045, b"28000", b"Access denied")),
    }


def write(dirname, seeds):
    os.makedirs(dirname, exist_ok=True)
    for name, data in seeds.items():
        with open(os.path.join(dirname, "seed_" + name), "wb") as fh:
            fh.write(data)


def main():
    base = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(
        os.path.abspath(__file__))
    write(os.path.join(base, "corpus", "client_sm"), client_seeds())
    write(os.path.join(base, "corpus", "backend_sm"), backend_seeds())
    write(os.path.join(base, "corpus", "backend_sm"), sha2_seeds())


if __name__ == "__main__":
    main()
