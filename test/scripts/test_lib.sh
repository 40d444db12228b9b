#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# Tests of scripts/lib.sh's package check, run by ctest as scripts.lib.
#
# On a fresh machine most packages are missing, dpkg-query exits 1, and the
# callers run under `set -euo pipefail`: the check once read "nothing is
# missing" there and never installed anything. These tests run the real
# functions under the same options, with apt-get replaced by a recorder
# (a directory put first on PATH), so nothing is installed.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=../../scripts/lib.sh
. "$here/../../scripts/lib.sh"

fails=0
passes=0
check()
{
    local what="$1"
    shift
    if "$@"; then
        passes=$((passes + 1))
        echo "ok - $what"
    else
        fails=$((fails + 1))
        echo "not ok - $what"
    fi
}

absent="sluice-test-no-such-package-$$"
present="bash"   # essential: installed on every Debian machine

# missing_packages prints exactly the names that are not installed.
out="$(missing_packages "$present" "$absent")"
check "missing_packages names the absent package" [ "$out" = "$absent" ]
out="$(missing_packages "$present")"
check "missing_packages prints nothing when all are installed" [ -z "$out" ]

# ensure_packages runs apt-get install for the absent name, and only it.
fake="$(mktemp -d)"
trap 'rm -rf "$fake"' EXIT
cat >"$fake/apt-get" <<'SH'
#!/bin/sh
echo "$*" >>"$FAKE_APT_LOG"
SH
chmod +x "$fake/apt-get"
export FAKE_APT_LOG="$fake/log"
# as_root would use sudo for a non-root user; call apt-get directly.
as_root() { "$@"; }
PATH="$fake:$PATH" ensure_packages "$present" "$absent" >/dev/null
log="$(cat "$fake/log" 2>/dev/null || true)"
check "ensure_packages updates the package lists" grep -q 'update' <<<"$log"
check "ensure_packages installs the absent package" \
    grep -q "install .*$absent" <<<"$log"
check "ensure_packages does not reinstall what is there" \
    bash -c "! grep -q 'install .* $present\\b' <<<\"\$0\"" "$log"

: >"$fake/log"
PATH="$fake:$PATH" ensure_packages "$present" >/dev/null
check "ensure_packages runs no apt-get when nothing is missing" \
    [ ! -s "$fake/log" ]

echo "$passes passed, $fails failed"
[ "$fails" -eq 0 ]
