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
 * Data-path callback results (nginx's vocabulary).
 *   SL_OK        done, carry on
 *   SL_AGAIN     not enough input yet / would block; call again later
 *   SL_DONE      finished and the object may be closed normally
 *   SL_DECLINED  not handled here, let the next party try
 *   SL_ERROR     failed; the caller closes the connection or session
 */
enum sl_rc {
    SL_OK = 0,
    SL_AGAIN = 1,
    SL_DONE = 2,
    SL_DECLINED = 3,
    SL_ERROR = -1,
};

#endif
