/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Common definitions shared by the core and every module: the return-code
 * vocabulary of the data path, visibility and branch-hint macros.
 */
#ifndef SLUICE_CCDEFS_H
#define SLUICE_CCDEFS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SL_EXPORT __attribute__((visibility("default")))
#define SL_LIKELY(x) __builtin_expect(!!(x), 1)
#define SL_UNLIKELY(x) __builtin_expect(!!(x), 0)
#define SL_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))
#define SL_PRINTF(f, a) __attribute__((format(printf, f, a)))

/*
 * Data-path results (nginx's vocabulary). Setup and syscall-like functions
 * return 0 or a negative errno instead (docs/design.md, "Return codes").
 *   SL_OK        done, carry on
 *   SL_AGAIN     not finished, waiting for I/O; call again on the next
 *                event (the core's TLS handshake step)
 *   SL_DONE      finished and the object may be closed normally
 *   SL_ERROR     failed; the caller closes the connection or session
 * (ABI 2.0 removed SL_DECLINED, which nothing returned or tested; 3 stays
 * unused.)
 */
enum sl_rc {
    SL_OK = 0,
    SL_AGAIN = 1,
    SL_DONE = 2,
    SL_ERROR = -1,
};

#endif
