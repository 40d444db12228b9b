/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Kernel forwarding of spliced sessions (server/core/splice.c).
 *
 * Both sockets of a spliced session (client and backend) sit in
 * sl_kf_socks, keyed by their socket cookie. kf_peers maps each socket's
 * cookie to its peer's cookie and to the counters of what that socket
 * received. The sk_skb verdict program runs for every skb a socket of the
 * map receives and redirects it to the egress of the peer socket, so the
 * bytes never reach the proxy process. A socket with no kf_peers entry
 * (being set up or torn down) keeps its data (SK_PASS): Sluice reads it.
 *
 * The client's side is followed packet by packet: rem is how much of the
 * current packet is still to come (0: the next byte starts a packet
 * header), so the program knows where each command starts however the
 * client's bytes are cut into skbs (pipelined commands, several per skb,
 * or one packet over many skbs). A command Sluice must see --
 * COM_QUIT, COM_PROCESS_KILL, COM_CHANGE_USER, or a COM_QUERY whose text
 * starts with KILL -- "diverts" the socket: that skb and every later one
 * stays with the socket (SK_PASS) and Sluice takes the session back to
 * user space (div_skip: how many bytes at the head of the first diverted
 * skb end a packet the kernel forwarded the start of; Sluice sends those
 * to the server as they are). When in doubt the program diverts: a packet
 * header cut between two skbs, more than MAX_PKTS packets starting in one
 * skb, or a query whose first token is not settled in its first QWIN
 * bytes.
 *
 * Statistics: every command (a packet with sequence 0 at a packet
 * boundary) is counted; an answered one starts the clock (req_ns, when
 * nothing was pending) and the server's next skb stops it: each pending
 * command gets that request -> first-response-byte time in the log-scale
 * histogram (the buckets of server/core/stats_common.c). Sluice reads the
 * counters and adds what changed to the service's and the server's
 * statistics.
 *
 * Counters: bytes are exact; "packets" counts skbs, which after GRO is
 * fewer than the TCP segments on the wire (approximate, as documented).
 */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

#define HIST_BUCKETS 21
#define MAX_PKTS 32 /* packet starts followed in one skb */
#define QWIN 64     /* query bytes looked at for a leading KILL */

#define COM_QUIT 0x01
#define COM_QUERY 0x03
#define COM_PROCESS_KILL 0x0c
#define COM_CHANGE_USER 0x11
#define COM_STMT_SEND_LONG_DATA 0x18
#define COM_STMT_CLOSE 0x19

struct kf_peer {
    __u64 peer;      /* the peer socket's cookie: key in kf_socks */
    __u64 bytes;     /* bytes this socket received and forwarded */
    __u64 packets;   /* skbs (approximately packets) */
    __u64 is_client; /* this socket is the client's */
    __u64 last_ns;   /* when it last received (bpf_ktime_get_ns) */
    /* the client's socket only: */
    __u64 rem;       /* bytes of the current packet still to come */
    __u64 diverted;  /* 1: every skb from now on goes to Sluice */
    __u64 div_skip;  /* see above */
    __u64 div_broken; /* diverted at a command whose header the kernel
                       * forwarded part of: Sluice closes the session */
    __u64 part;      /* a header cut between skbs: its first bytes */
    __u64 part_len;  /* how many (0: none) */
    __u64 last_seq;  /* the sequence number of the last packet */
    __u64 cmds;      /* commands forwarded */
    __u64 pending;   /* answered commands sent since the server last did */
    __u64 req_ns;    /* when the first of those was sent */
    __u64 timed;     /* commands timed (histogram samples) */
    __u64 sum_ns;    /* their total time */
    __u64 hist[HIST_BUCKETS];
};

struct {
    __uint(type, BPF_MAP_TYPE_SOCKHASH);
    __uint(max_entries, 65536);
    __type(key, __u64);
    __type(value, __u64);
} kf_socks SEC(".maps");

struct {
    __uint(type, BPF_MAP_TYPE_HASH);
    __uint(max_entries, 65536);
    /* entries (about 350 bytes) are made as sessions are spliced, not
     * 65,536 of them up front; the program never adds one */
    __uint(map_flags, BPF_F_NO_PREALLOC);
    __type(key, __u64);
    __type(value, struct kf_peer);
} kf_peers SEC(".maps");

/* Upper bounds of the histogram buckets (ns), as sl__hist_le_ns. */
static const __u64 le_ns[HIST_BUCKETS - 1] = {
    10000ULL, 25000ULL, 50000ULL, 100000ULL, 250000ULL, 500000ULL,
    1000000ULL, 2500000ULL, 5000000ULL, 10000000ULL, 25000000ULL,
    50000000ULL, 100000000ULL, 250000000ULL, 500000000ULL,
    1000000000ULL, 2500000000ULL, 5000000000ULL, 10000000000ULL,
    30000000000ULL,
};

/* Whitespace (space, tab, LF, VT, FF, CR) as a bit test: one branch, so
 * the verifier does not follow a path per whitespace character. */
static __always_inline int
is_space(__u8 c)
{
    return c <= 32 && ((0x100003e00ULL >> (c & 63)) & 1);
}

static __always_inline void
add_sample(struct kf_peer *c, __u64 ns, __u64 n)
{
    __u32 b = HIST_BUCKETS - 1;

    for (__u32 i = 0; i < HIST_BUCKETS - 1; i++) {
        if (ns <= le_ns[i]) {
            b = i;
            break;
        }
    }
    __sync_fetch_and_add(&c->timed, n);
    __sync_fetch_and_add(&c->sum_ns, ns * n);
    if (b < HIST_BUCKETS) {
        __sync_fetch_and_add(&c->hist[b], n);
    }
}

/*
 * The COM_QUERY text that starts at text in skb (avail bytes of it in the
 * packet): 0 when it does not start with KILL after whitespace, else 1:
 * KILL, or the program cannot tell (a comment first -- the verifier
 * would not accept a comment scanner cheaply --, or only whitespace in the
 * first QWIN bytes, or the text continues in the next skb). A global
 * function, verified once.
 */
__attribute__((noinline)) long
kf_query(struct __sk_buff *skb, __u32 text, __u32 avail)
{
    __u8 q[QWIN + 4];
    __u32 len = skb->len;
    __u32 n, i;
    __u64 nn;
    __u8 c, d;

    __builtin_memset(q, 0, sizeof(q));
    n = len > text ? len - text : 0;
    if (n > avail) {
        n = avail;
    }
    if (n > QWIN) {
        n = QWIN;
    }
    nn = n;
    /* keep the bounds in the register the helper gets */
    asm volatile("" : "+r"(nn));
    if (nn > 0 && nn <= QWIN &&
        bpf_skb_load_bytes(skb, text, q, nn) != 0) {
        return 1;
    }
    for (i = 0; i < QWIN; i++) {
        if (i >= n || !is_space(q[i])) {
            break;
        }
    }
    if (i >= n) {
        return i < avail;   /* only whitespace here: more to come? */
    }
    if (i >= QWIN) {
        return 1;
    }
    /* i < QWIN: q[i + 3] is inside q */
    c = q[i];
    d = q[i + 1];
    if ((c | 0x20) != 'k') {
        /* a comment first: cannot tell cheaply, Sluice looks */
        return c == '#' || (c == '/' && d == '*') || (c == '-' && d == '-') ||
               (i + 1 >= n && (c == '/' || c == '-'));
    }
    if (i + 3 >= n) {
        return 1;
    }
    return (d | 0x20) == 'i' && (q[i + 2] | 0x20) == 'l' &&
           (q[i + 3] | 0x20) == 'l';
}

/* What kf_packet found: the packet's length (header included) in the low
 * 32 bits, its sequence number in bits 40-47, and these flags. */
#define PKT_CMD (1ULL << 32)      /* a command (sequence 0) */
#define PKT_ANSWERED (1ULL << 33) /* one the server answers */

/*
 * The client packet whose header starts npre bytes before off in skb
 * (those bytes, held from the previous skb, are in pre, first byte
 * lowest; npre + the bytes from off to the end are at least 5): -1 when
 * Sluice must see it (or the program cannot tell), else its length, its
 * sequence number and flags. wrap: the previous packet had sequence 255,
 * so a sequence 0 continues it (a LOCAL INFILE transfer of more than 254
 * packets) rather than starting a command. A global function: the
 * verifier checks it once, not once per packet of the caller's loop.
 */
__attribute__((noinline)) long
kf_packet(struct __sk_buff *skb, __u32 off, __u64 pre, __u32 npre,
          __u32 wrap)
{
    __u8 hdr[5];
    __u32 len = skb->len;
    __u32 plen;
    long ret;
    __u8 cmd;

    if (off > len || npre > 4) {
        return -1;
    }
    if (npre == 0) {
        if (len - off < 5 ||
            bpf_skb_load_bytes(skb, off, hdr, sizeof(hdr)) != 0) {
            return -1;
        }
    } else {
        for (__u32 i = 0; i < 5; i++) {
            if (i < npre) {
                hdr[i] = (__u8)(pre >> (8 * i));
            } else if (bpf_skb_load_bytes(skb, off + i - npre, &hdr[i],
                                          1) != 0) {
                return -1;
            }
        }
    }
    plen = (__u32)hdr[0] | (__u32)hdr[1] << 8 | (__u32)hdr[2] << 16;
    ret = (long)plen + 4 + ((long)hdr[3] << 40);
    if (hdr[3] != 0 || plen == 0 || wrap) {
        return ret;  /* a continuation, LOCAL INFILE data */
    }
    cmd = hdr[4];
    if (cmd == COM_QUIT || cmd == COM_PROCESS_KILL ||
        cmd == COM_CHANGE_USER) {
        return -1;
    }
    if (cmd == COM_QUERY && kf_query(skb, off + 5 - npre, plen - 1) != 0) {
        return -1;
    }
    ret |= PKT_CMD;
    if (cmd != COM_STMT_SEND_LONG_DATA && cmd != COM_STMT_CLOSE) {
        ret |= PKT_ANSWERED;
    }
    return ret;
}

/* The bytes from off to the end of skb (fewer than 5 - npre), packed to
 * follow npre bytes held already (first byte lowest); -1 on failure. */
__attribute__((noinline)) long
kf_gather(struct __sk_buff *skb, __u32 off, __u32 npre)
{
    __u32 len = skb->len;
    long v = 0;

    for (__u32 i = 0; i < 4; i++) {
        __u8 c;

        if (off + i >= len || npre + i >= 4) {
            break;
        }
        if (bpf_skb_load_bytes(skb, off + i, &c, 1) != 0) {
            return -1;
        }
        v |= (long)c << (8 * ((npre + i) & 7));
    }
    return v;
}

/* The client's skb: follow its packets; 1 to divert it. */
static __always_inline int
client_skb(struct __sk_buff *skb, struct kf_peer *p, __u64 now)
{
    __u32 len = skb->len;
    __u64 off = p->rem;
    __u64 pre = p->part;
    __u32 npre = (__u32)p->part_len;
    long r;

    if (npre > 0) {
        off = 0;
    }
    for (int k = 0; k < MAX_PKTS; k++) {
        if (off >= len && npre == 0) {
            p->rem = off - len;
            return 0;
        }
        if (off > len || npre > 4) {
            return 1;
        }
        if (npre + (len - off) < 5) {
            /* a header (and command byte) cut between skbs: hold what is
             * here of it for the next skb */
            r = kf_gather(skb, (__u32)off, npre);
            if (r < 0) {
                return 1;
            }
            pre |= (__u64)r;
            p->part = pre;
            p->part_len = npre + (len - off);
            p->rem = 0;
            return 0;
        }
        r = kf_packet(skb, (__u32)off, pre, npre, p->last_seq == 255);
        if (r < 0) {
            /* With a header cut, the server has its start: Sluice cannot
             * take that command over (it closes the session). */
            p->div_broken = npre > 0;
            return 1;
        }
        p->last_seq = (r >> 40) & 0xff;
        if (r & PKT_CMD) {
            __sync_fetch_and_add(&p->cmds, 1);
        }
        if (r & PKT_ANSWERED) {
            if (p->pending == 0) {
                p->req_ns = now;
            }
            __sync_fetch_and_add(&p->pending, 1);
        }
        off = off + (r & 0xffffffffULL) - npre;
        npre = 0;
        pre = 0;
        p->part = 0;
        p->part_len = 0;
    }
    if (off >= len) {
        p->rem = off - len;
        return 0;
    }
    return 1;   /* more packets in this skb than followed */
}

SEC("sk_skb")
int kf_verdict(struct __sk_buff *skb)
{
    __u64 cookie = bpf_get_socket_cookie(skb);
    struct kf_peer *p = bpf_map_lookup_elem(&kf_peers, &cookie);
    __u64 peer, now;

    /* A bare FIN (no bytes) stays with its socket: redirected, the
     * kernel's send of zero bytes counts as a failure and marks the peer
     * socket broken (EPIPE), so Sluice could not write its last words. */
    if (p == 0 || skb->len == 0) {
        return SK_PASS;
    }
    peer = p->peer;
    now = bpf_ktime_get_ns();
    if (p->is_client) {
        __u64 rem = p->rem;

        if (p->diverted) {
            return SK_PASS;
        }
        if (client_skb(skb, p, now)) {
            p->div_skip = rem;
            p->diverted = 1;
            return SK_PASS;
        }
    } else {
        struct kf_peer *c = bpf_map_lookup_elem(&kf_peers, &peer);

        __u8 h[7];

        /* A progress report
         * (an ERR packet with code 0xffff: ALTER TABLE and the like, for
         * clients with CLIENT_PROGRESS) leading the skb is not the
         * answer either: the statement still runs. */
        if (c != 0 && c->pending > 0 &&
            !(skb->len >= 7 && bpf_skb_load_bytes(skb, 0, h, 7) == 0 &&
              h[4] == 0xff && h[5] == 0xff && h[6] == 0xff)) {
            __u64 n = c->pending;

            c->pending = 0;
            add_sample(c, now - c->req_ns, n);
        }
    }
    p->last_ns = now;
    __sync_fetch_and_add(&p->bytes, skb->len);
    __sync_fetch_and_add(&p->packets, 1);
    return bpf_sk_redirect_hash(skb, &kf_socks, &peer, 0);
}

char LICENSE[] SEC("license") = "Apache-2.0";
