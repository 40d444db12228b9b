# SPDX-License-Identifier: Apache-2.0
"""Hostile clients for the soak test (test_soak.py), run as a process of
its own:

    python3 hostile.py --port P --seconds S [--stallers N] [--garbage N]
                       [--oversize N] [--guessers N] --user U --password PW

Four kinds of attacker, each from its own loopback source addresses
(127.0.0.2 and up), so Sluice's per-host limits see them as other hosts
than the well-behaved clients on 127.0.0.1:

  stallers  connect, read the greeting and say nothing; when Sluice closes
            them (auth_timeout) they connect again
  garbage   connect and send random bytes instead of a login
  oversize  log in, then send a command announcing 16 MiB (more than
            the soak service's max_allowed_packet) and stream its bytes
  guessers  log in, then guess passwords with COM_CHANGE_USER

Each attacker paces itself (about one attempt a second after its previous
one ended): the point is how many hostile connections Sluice holds off at
once, and an attacker process that burns the test machine's cores would
measure the machine, not Sluice. Everything stops by itself after
--seconds. The last line printed is a
JSON object of counters: what the attackers did and what Sluice answered
(closes, error codes). Loopback only; bounded in time and count.
"""

import argparse
import asyncio
import hashlib
import json
import os
import random
import resource
import struct
import time
from collections import Counter

HOST = "127.0.0.1"
CAPS = (0x00000001 | 0x00000200 | 0x00002000 | 0x00008000 | 0x00080000)
# LONG_PASSWORD | PROTOCOL_41 | TRANSACTIONS | SECURE_CONNECTION |
# PLUGIN_AUTH
NATIVE = b"mysql_native_password"

stats = Counter()


def native_token(password, scramble):
    if not password:
        return b""
    h1 = hashlib.sha1(password.encode()).digest()
    h2 = hashlib.sha1(h1).digest()
    h3 = hashlib.sha1(scramble + h2).digest()
    return bytes(a ^ b for a, b in zip(h1, h3))


def packet(seq, payload):
    return struct.pack("<I", len(payload))[:3] + bytes([seq]) + payload


async def read_packet(reader, timeout):
    head = await asyncio.wait_for(reader.readexactly(4), timeout)
    n = head[0] | head[1] << 8 | head[2] << 16
    body = await asyncio.wait_for(reader.readexactly(n), timeout)
    return head[3], body


def error_code(body):
    if body[:1] == b"\xff" and len(body) >= 3:
        return struct.unpack("<H", body[1:3])[0]
    return None


def greeting_scramble(body):
    """The 20-byte scramble of a protocol-10 greeting."""
    pos = body.index(b"\0", 1) + 1 + 4
    part1 = body[pos:pos + 8]
    pos += 8 + 1 + 2 + 1 + 2 + 2 + 1 + 10
    part2 = body[pos:pos + 12]
    return part1 + part2


async def connect(src, port):
    return await asyncio.open_connection(HOST, port, local_addr=(src, 0))


def note_error(kind, code):
    stats[f"{kind}_err_{code}"] += 1


async def login(src, port, user, password):
    """A logged-in (reader, writer), or None (the answer is counted)."""
    reader, writer = await connect(src, port)
    seq, body = await read_packet(reader, 15)
    code = error_code(body)
    if code is not None:
        writer.close()
        return None, code
    scramble = greeting_scramble(body)
    resp = (struct.pack("<IIB", CAPS, 1 << 24, 45) + b"\0" * 23 +
            user.encode() + b"\0" +
            bytes([20]) + native_token(password, scramble) +
            NATIVE + b"\0")
    writer.write(packet(seq + 1, resp))
    await writer.drain()
    seq, body = await read_packet(reader, 15)
    if body[:1] == b"\xfe":                     # auth switch
        name_end = body.index(b"\0", 1)
        new_scramble = body[name_end + 1:name_end + 21]
        writer.write(packet(seq + 1, native_token(password, new_scramble)))
        await writer.drain()
        seq, body = await read_packet(reader, 15)
    code = error_code(body)
    if code is not None:
        writer.close()
        return None, code
    return (reader, writer), None


async def staller(src, port, deadline):
    while time.monotonic() < deadline:
        try:
            reader, writer = await connect(src, port)
        except OSError:
            stats["staller_connect_failed"] += 1
            await asyncio.sleep(0.5)
            continue
        stats["staller_connects"] += 1
        try:
            _, body = await read_packet(reader, 15)
            code = error_code(body)
            if code is not None:
                note_error("staller", code)
            # say nothing; wait for Sluice to close us (or the end)
            while True:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                data = await asyncio.wait_for(reader.read(4096), left)
                if not data:
                    stats["staller_closed_by_proxy"] += 1
                    break
        except (asyncio.TimeoutError, asyncio.IncompleteReadError):
            pass
        except OSError:
            stats["staller_reset"] += 1
        finally:
            writer.close()
        if code is not None:
            await asyncio.sleep(0.5)            # refused: back off a little


async def garbage(src, port, deadline, rng):
    while time.monotonic() < deadline:
        try:
            reader, writer = await connect(src, port)
        except OSError:
            stats["garbage_connect_failed"] += 1
            await asyncio.sleep(0.5)
            continue
        stats["garbage_connects"] += 1
        try:
            _, body = await read_packet(reader, 15)
            writer.write(os.urandom(rng.randint(1, 4096)))
            await writer.drain()
            left = max(0.1, min(15, deadline - time.monotonic()))
            while await asyncio.wait_for(reader.read(65536), left):
                pass
            stats["garbage_closed_by_proxy"] += 1
        except (asyncio.TimeoutError, asyncio.IncompleteReadError):
            pass
        except OSError:
            stats["garbage_reset"] += 1
        finally:
            writer.close()
        await asyncio.sleep(1.0)


async def oversize(src, port, deadline, user, password):
    chunk = b"x" * 65536
    while time.monotonic() < deadline:
        try:
            conn, code = await login(src, port, user, password)
        except (OSError, asyncio.TimeoutError, asyncio.IncompleteReadError):
            stats["oversize_login_failed"] += 1
            await asyncio.sleep(0.5)
            continue
        if conn is None:
            note_error("oversize_login", code)
            await asyncio.sleep(0.5)
            continue
        reader, writer = conn
        try:
            # a COM_QUERY announcing 0xFFFFFF bytes (the soak service's
            # max_allowed_packet is smaller) and its first bytes; Sluice
            # answers from the header alone
            writer.write(b"\xff\xff\xff\x00\x03" + chunk)
            await writer.drain()
            _, body = await read_packet(reader, 15)
            note_error("oversize", error_code(body))
            # keep streaming the announced bytes until Sluice hangs up
            for _ in range(63):
                writer.write(chunk)
                await asyncio.wait_for(writer.drain(), 5)
            while await asyncio.wait_for(reader.read(65536), 15):
                pass
            stats["oversize_closed_by_proxy"] += 1
        except (OSError, asyncio.TimeoutError, asyncio.IncompleteReadError):
            stats["oversize_closed_by_proxy"] += 1
        finally:
            writer.close()
        await asyncio.sleep(1.0)


async def guesser(src, port, deadline, user, password, rng):
    while time.monotonic() < deadline:
        try:
            conn, code = await login(src, port, user, password)
        except (OSError, asyncio.TimeoutError, asyncio.IncompleteReadError):
            stats["guesser_login_failed"] += 1
            await asyncio.sleep(0.5)
            continue
        if conn is None:
            note_error("guesser_login", code)
            await asyncio.sleep(1.0)
            continue
        reader, writer = conn
        try:
            while time.monotonic() < deadline:
                guess = f"guess-{rng.random()}"
                payload = (b"\x11" + user.encode() + b"\0" + bytes([20]) +
                           native_token(guess, b"\0" * 20) + b"\0" +
                           struct.pack("<H", 45) + NATIVE + b"\0")
                writer.write(packet(0, payload))
                await writer.drain()
                seq, body = await read_packet(reader, 15)
                if body[:1] == b"\xfe":
                    name_end = body.index(b"\0", 1)
                    scr = body[name_end + 1:name_end + 21]
                    writer.write(packet(seq + 1, native_token(guess, scr)))
                    await writer.drain()
                    seq, body = await read_packet(reader, 15)
                stats["guesses"] += 1
                note_error("guess", error_code(body))
                await asyncio.sleep(0.05)
        except (OSError, asyncio.TimeoutError, asyncio.IncompleteReadError):
            stats["guesser_closed_by_proxy"] += 1
        finally:
            writer.close()
        await asyncio.sleep(1.0)


def sources(first, n_hosts):
    return [f"127.0.0.{first + i}" for i in range(n_hosts)]


async def main(args):
    deadline = time.monotonic() + args.seconds
    rng = random.Random(1)
    tasks = []
    stall_src = sources(2, 8)
    for i in range(args.stallers):
        tasks.append(staller(stall_src[i % len(stall_src)], args.port,
                             deadline))
    garbage_src = sources(10, 2)
    for i in range(args.garbage):
        tasks.append(garbage(garbage_src[i % 2], args.port, deadline, rng))
    for _ in range(args.oversize):
        tasks.append(oversize("127.0.0.12", args.port, deadline, args.user,
                              args.password))
    for _ in range(args.guessers):
        tasks.append(guesser("127.0.0.13", args.port, deadline, args.user,
                             args.password, rng))
    await asyncio.gather(*tasks)


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--seconds", type=float, required=True)
    p.add_argument("--stallers", type=int, default=2000)
    p.add_argument("--garbage", type=int, default=200)
    p.add_argument("--oversize", type=int, default=50)
    p.add_argument("--guessers", type=int, default=50)
    p.add_argument("--user", required=True)
    p.add_argument("--password", required=True)
    a = p.parse_args()
    asyncio.run(main(a))
    ru = resource.getrusage(resource.RUSAGE_SELF)
    stats["attacker_cpu_s"] = round(ru.ru_utime + ru.ru_stime, 1)
    print(json.dumps(dict(sorted(stats.items()))), flush=True)
