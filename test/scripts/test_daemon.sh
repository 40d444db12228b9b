#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# What makes Sluice install like real software, run by ctest:
#
#   test_daemon.sh version BUILD SRC VERSION  --version of sluice and maxctrl
#   test_daemon.sh man BUILD SRC              the generated man pages
#   test_daemon.sh unit BUILD SRC BINDIR      the rendered systemd unit
#
# Exit 77 (ctest: skipped) when a tool the check needs is missing.
set -euo pipefail

mode="$1"
build="$2"
src="$3"

fails=0
check()
{
    local what="$1"
    shift
    if "$@"; then
        echo "ok - $what"
    else
        fails=$((fails + 1))
        echo "not ok - $what"
    fi
}

contains()
{
    grep -qE -- "$2" <<<"$1"
}

test_version()
{
    local version="$1" major minor rev out tmp want commit
    major="$(sed -n 's/^#define SL_MODULE_ABI_MAJOR \([0-9]*\).*/\1/p' \
        "$src/include/sluice/module.h")"
    minor="$(sed -n 's/^#define SL_MODULE_ABI_MINOR \([0-9]*\).*/\1/p' \
        "$src/include/sluice/module.h")"
    rev='[0-9a-f]{7}(-dirty)?'
    out="$("$build/bin/sluice" --version)"
    echo "# $out"
    want="^sluice ${version//./\\.} \\(git $rev\\) module ABI $major\\.$minor\$"
    check "sluice --version: version, revision, module ABI" \
        contains "$out" "$want"
    # a commit of this checkout (the build may predate the last commit)
    if [ -e "$src/.git" ] && command -v git >/dev/null; then
        commit="$(sed -n 's/.*(git \([0-9a-f]*\).*/\1/p' <<<"$out")"
        check "the revision $commit is a commit of $src" \
            git -C "$src" cat-file -e "$commit^{commit}"
    fi
    out="$("$build/bin/maxctrl" --version)"
    echo "# $out"
    check "maxctrl --version: version and revision" \
        contains "$out" "^maxctrl ${version//./\\.} \\(git $rev\\)\$"
    tmp="$(mktemp -d)"
    cmake -DSRC="$tmp" -DOUT="$tmp/r.h" -P "$src/cmake/revision.cmake"
    check "outside git the revision is unknown" \
        grep -q '^#define SLUICE_REVISION "unknown"$' "$tmp/r.h"
    cmake -DSRC="$src" -DOUT="$tmp/r.h" -DREVISION=1.2-debian \
        -P "$src/cmake/revision.cmake"
    check "-DSLUICE_REVISION wins over git" \
        grep -q '^#define SLUICE_REVISION "1.2-debian"$' "$tmp/r.h"
    rm -rf "$tmp"
}

# The page renders without a warning and has its NAME and SYNOPSIS.
check_page()
{
    local page="$1" name="$2" warnings text
    warnings="$(LC_ALL=C.UTF-8 MANROFFSEQ='' MANWIDTH=80 man --warnings \
        -E UTF-8 -l -Tutf8 -Z "$page" 2>&1 >/dev/null)"
    check "$name: no warnings from man --warnings" [ -z "$warnings" ]
    [ -z "$warnings" ] || echo "$warnings"
    text="$(LC_ALL=C.UTF-8 MANWIDTH=80 man -l "$page" 2>/dev/null | col -b)"
    check "$name: NAME section" contains "$text" "^NAME\$"
    check "$name: its NAME line" contains "$text" "^ +$name - "
    check "$name: SYNOPSIS section" contains "$text" "^SYNOPSIS\$"
    check "$name: gzip without name or time stamp" \
        [ "$(od -An -tu4 -j4 -N4 "$page" | tr -d ' ')" = 0 ]
    printf '%s\n' "$text"
}

test_man()
{
    local sluice maxctrl verb
    command -v man >/dev/null || exit 77
    # check_page runs in a subshell: its "not ok" lines count here
    sluice="$(check_page "$build/docs/man/sluice.8.gz" sluice)"
    grep -E '^(not )?ok' <<<"$sluice"
    fails=$((fails + $(grep -c '^not ok' <<<"$sluice" || true)))
    for section in OPTIONS SIGNALS ENVIRONMENT FILES EXAMPLES "SEE ALSO"; do
        check "sluice(8): $section" contains "$sluice" "^$section\$"
    done
    check "sluice(8): the watchdog" contains "$sluice" "WATCHDOG=1"
    maxctrl="$(check_page "$build/docs/man/maxctrl.1.gz" maxctrl)"
    grep -E '^(not )?ok' <<<"$maxctrl"
    fails=$((fails + $(grep -c '^not ok' <<<"$maxctrl" || true)))
    # every verb mc_run() dispatches is in the help, so in the page
    for verb in $(grep -o 'strcmp(cmd, "[a-z]*")' \
        "$src/maxctrl/maxctrl_cmds.c" | cut -d'"' -f2); do
        check "maxctrl(1) lists the verb '$verb'" \
            contains "$maxctrl" "^ +$verb [A-Za-z]"
    done
}

test_unit()
{
    local bindir="$1" unit="$build/etc/sluice.service" tmp
    check "the unit starts $bindir/sluice" \
        grep -qx "ExecStart=$bindir/sluice --config /etc/sluice.cnf" "$unit"
    for line in Type=notify NotifyAccess=main User=sluice \
        RuntimeDirectory=sluice ProtectSystem=strict NoNewPrivileges=true; do
        check "the unit has $line" grep -qx "$line" "$unit"
    done
    check "the unit has WatchdogSec" grep -q "^WatchdogSec=" "$unit"
    command -v systemd-analyze >/dev/null || exit 77
    # verify insists that ExecStart exists: point it at the built binary
    tmp="$(mktemp -d)"
    sed "s|^ExecStart=$bindir/sluice|ExecStart=$build/bin/sluice|" \
        "$unit" >"$tmp/sluice.service"
    check "systemd-analyze verify accepts the unit" \
        systemd-analyze verify --man=no "$tmp/sluice.service"
    rm -rf "$tmp"
}

case "$mode" in
    version) test_version "$4" ;;
    man) test_man ;;
    unit) test_unit "$4" ;;
    *) echo "usage: $0 version|man|unit BUILD SRC [ARG]" >&2; exit 2 ;;
esac
[ "$fails" -eq 0 ]
