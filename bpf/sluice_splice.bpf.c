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
 * (being set up or torn down) keeps its data (SK_PASS): Sluice reads it,
 * and so does a client socket for a COM_CHANGE_USER (see below).
 *
 * Counters: bytes are exact; "packets" counts skbs, which after GRO is
 * fewer than the TCP segments on the wire (approximate, as documented).
 */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct kf_peer {
    __u64 peer;      /* the peer socket's cookie: key in kf_socks */
    __u64 bytes;     /* bytes this socket received and forwarded */
    __u64 packets;   /* skbs (approximately packets) */
    __u64 is_client; /* this socket is the client's */
    __u64 last_ns;   /* when it last received (bpf_ktime_get_ns) */
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
    __type(key, __u64);
    __type(value, struct kf_peer);
} kf_peers SEC(".maps");

SEC("sk_skb")
int kf_verdict(struct __sk_buff *skb)
{
    __u64 cookie = bpf_get_socket_cookie(skb);
    struct kf_peer *p = bpf_map_lookup_elem(&kf_peers, &cookie);
    __u64 peer;
    __u8 hdr[5];

    if (p == 0) {
        return SK_PASS;
    }
    /* COM_CHANGE_USER goes to Sluice, which takes the session back to
     * user space: the client's scramble is for Sluice's greeting, not the
     * server's, so the protocol module must rebuild it. It is sent alone
     * at a command boundary: one skb holding exactly one packet with
     * sequence 0 (anything else is forwarded). */
    if (p->is_client && skb->len >= 5 && skb->len <= 65536 &&
        bpf_skb_load_bytes(skb, 0, hdr, sizeof(hdr)) == 0 &&
        hdr[4] == 0x11 && hdr[3] == 0 &&
        ((__u32)hdr[0] | (__u32)hdr[1] << 8 | (__u32)hdr[2] << 16) + 4 ==
            skb->len) {
        return SK_PASS;
    }
    peer = p->peer;
    p->last_ns = bpf_ktime_get_ns();
    __sync_fetch_and_add(&p->bytes, skb->len);
    __sync_fetch_and_add(&p->packets, 1);
    return bpf_sk_redirect_hash(skb, &kf_socks, &peer, 0);
}

char LICENSE[] SEC("license") = "Apache-2.0";
