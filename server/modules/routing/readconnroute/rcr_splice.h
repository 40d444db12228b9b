/* SPDX-License-Identifier: Apache-2.0 */
/*
 * readconnroute's kernel forwarding (kernel_forwarding=auto|off): which
 * sessions ask the core to splice their client and backend sockets
 * (include/sluice/splice.h). Kept apart from readconnroute.c.
 */
#ifndef RCR_SPLICE_H
#define RCR_SPLICE_H

#include <stdbool.h>
#include <stdint.h>
#include <jansson.h>

struct sl_params;
struct sl_session;
struct sl_backend;

extern const char *const rcr_kfwd_names[];

/* The service's kernel_forwarding setting resolved at create_instance
 * (main thread): true when auto and the kernel offers it (the core logs
 * once why not). */
bool rcr_kfwd_enabled(const struct sl_params *params);
/* new_session, after the backend connect started: ask for the splice;
 * a master-only session is closed by the core if the server loses the
 * master role (the per-command check cannot run while spliced). */
void rcr_kfwd_session(bool enabled, struct sl_session *ses,
                      struct sl_backend *b, bool master_only);
/* Diagnostics: the setting and whether it is in effect. */
json_t *rcr_kfwd_json(int mode, bool enabled);

#endif
