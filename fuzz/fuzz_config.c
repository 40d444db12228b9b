/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target for the configuration reader: arbitrary bytes go through
 * the ini parser and the validator ([maxscale], servers, and the core
 * parameters of every other object). Modules are looked up in a directory
 * that does not exist, so no code is ever loaded from fuzz input.
 *
 * With SLUICE_FUZZ=ON the whole tree (libsluice included) is built with
 * -fsanitize=fuzzer-no-link, so the parser and validator in libsluice are
 * coverage-instrumented and this target just links against them.
 */
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include <sluice/log.h>

#include "config_int.h"
#include "internal.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    atomic_store(&sl_log_max_level, -1);   /* silence ignored-parameter info */
    return 0;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct sl_cfg_diag d = {
        .file = "fuzz.cnf",
        .quiet = true,
        .module_dir = "/nonexistent/sluice-fuzz-modules",
    };
    struct sl_config *cfg;

    cfg = sl__config_load_text((const char *)data, size, false, &d);
    sl__config_free(cfg);
    sl__cfg_diag_free(&d);
    return 0;
}
