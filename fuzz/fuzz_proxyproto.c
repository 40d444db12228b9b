/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target: the PROXY protocol header parser (proxyproto.c) on
 * untrusted client bytes, fed whole and in every prefix a read may leave
 * (a prefix of a header that parses is never an error, and a header's
 * length never exceeds its input); a parsed address written back as a v1
 * line parses to the same addresses; the proxy_protocol_networks parser
 * on the input as text.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "proxyproto.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void
same_addr(const struct sockaddr_storage *a, const struct sockaddr_storage *b)
{
    size_t n = a->ss_family == AF_INET ? sizeof(struct sockaddr_in)
                                       : sizeof(struct sockaddr_in6);

    /* the v1 writer unmaps IPv4-mapped addresses: compare families only
     * when they agree */
    if (a->ss_family == b->ss_family && memcmp(a, b, n) != 0) {
        abort();
    }
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct sl_pp_header h;
    struct sl_pp_header again;
    const char *why;
    char line[SL_PP_V1_MAX + 1];
    int n = sl__pp_parse(data, size, &h, &why);

    if (n > (int)size) {
        abort();
    }
    if (n > 0) {
        for (size_t i = 0; i < (size_t)n; i++) {
            if (sl__pp_parse(data, i, &again, &why) != SL_PP_NEED_MORE) {
                abort();
            }
        }
        if (h.family == AF_INET || h.family == AF_INET6) {
            size_t len = sl__pp_write_v1(line, sizeof(line),
                                         (struct sockaddr *)&h.src,
                                         (struct sockaddr *)&h.dst);

            if (sl__pp_parse((const uint8_t *)line, len, &again, &why) !=
                (int)len) {
                abort();
            }
            same_addr(&h.src, &again.src);
            same_addr(&h.dst, &again.dst);
        }
    }
    (void)sl__pp_detect(data, size);
    if (size < 4096) {
        char *text = malloc(size + 1);
        struct sl_pp_net *nets;
        size_t nn;
        char err[256];

        if (text != NULL) {
            memcpy(text, data, size);
            text[size] = '\0';
            if (sl__pp_networks_parse(text, &nets, &nn, err, sizeof(err)) ==
                0) {
                if (n > 0 && h.family != AF_UNSPEC) {
                    (void)sl__pp_networks_match(nets, nn,
                                                (struct sockaddr *)&h.src);
                }
                free(nets);
            }
            free(text);
        }
    }
    return 0;
}
