/* SPDX-License-Identifier: Apache-2.0 */
/* A shared object without the module entry point: the loader refuses it. */
#include <sluice/ccdefs.h>

SL_EXPORT int not_a_module(void);

int
not_a_module(void)
{
    return 42;
}
