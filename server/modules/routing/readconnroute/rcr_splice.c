/* SPDX-License-Identifier: Apache-2.0 */
/* readconnroute's kernel forwarding: see rcr_splice.h. */
#include <sluice/params.h>
#include <sluice/server.h>
#include <sluice/splice.h>

#include "rcr_splice.h"

/* Index 0 is the default. */
const char *const rcr_kfwd_names[] = {"auto", "off", NULL};

/* What a master-only session requires of its server (as route_query). */
#define KFWD_MASTER_MASK (SL_SRV_MASTER | SL_SRV_RUNNING | SL_SRV_MAINT)
#define KFWD_MASTER_OK (SL_SRV_MASTER | SL_SRV_RUNNING)

bool
rcr_kfwd_enabled(const struct sl_params *params)
{
    return sl_params_enum(params, "kernel_forwarding") == 0 &&
           sl_kernel_forwarding_available(NULL);
}

void
rcr_kfwd_session(bool enabled, struct sl_session *ses, struct sl_backend *b,
                 bool master_only)
{
    if (!enabled) {
        return;
    }
    sl_session_request_splice(ses, b, master_only ? KFWD_MASTER_MASK : 0,
                              master_only ? KFWD_MASTER_OK : 0);
}

json_t *
rcr_kfwd_json(int mode, bool enabled)
{
    const char *why = "";

    if (mode == 0 && !enabled) {
        sl_kernel_forwarding_available(&why);
    }
    return json_pack("{s:s, s:b, s:s}", "setting",
                     rcr_kfwd_names[mode == 1 ? 1 : 0], "active", enabled,
                     "unavailable_reason", why);
}
