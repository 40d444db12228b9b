/* SPDX-License-Identifier: Apache-2.0 */
/* A filter module the loader must refuse: no operations table. */
#include <sluice/filter.h>
#include <sluice/module.h>

SL_MODULE_DEFINE({
    .magic = SL_MODULE_MAGIC,
    .abi_major = SL_MODULE_ABI_MAJOR,
    .abi_minor = SL_MODULE_ABI_MINOR,
    .signature = SL_MODULE_SIGNATURE,
    .type = SL_MODULE_FILTER,
    .name = "testmod_noops",
    .ops = NULL,
});
