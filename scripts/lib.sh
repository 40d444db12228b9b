# SPDX-License-Identifier: Apache-2.0
# Shared helpers for scripts/run, scripts/test, scripts/sandbox and
# bench/run. Source it; it defines paths, the sandbox accounts and small
# functions. Nothing here starts a process by itself.
#
# Everything that knows how the `sluice` daemon is invoked lives in
# scripts/sluice-exec, so there is one place to adapt its flags.

SLUICE_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SANDBOX="${SLUICE_SANDBOX:-$SLUICE_ROOT/sandbox}"

# Sandbox accounts. The system tests read the same values from the
# environment (test/system/conftest.py has the same defaults).
export SLUICE_APP_USER="${SLUICE_APP_USER:-app}"
export SLUICE_APP_PASSWORD="${SLUICE_APP_PASSWORD:-app_pw}"
export SLUICE_SERVICE_USER="${SLUICE_SERVICE_USER:-sluice}"
export SLUICE_SERVICE_PASSWORD="${SLUICE_SERVICE_PASSWORD:-sluice_pw}"
export SLUICE_REPL_USER="${SLUICE_REPL_USER:-repl}"
export SLUICE_REPL_PASSWORD="${SLUICE_REPL_PASSWORD:-repl_pw}"

# Ports: the three servers and the scripts/run instance of Sluice.
# SLUICE_SANDBOX_PORT_BASE moves the three servers (default 3311..3313).
SANDBOX_PORT_BASE="${SLUICE_SANDBOX_PORT_BASE:-3311}"
SANDBOX_PORTS=("$SANDBOX_PORT_BASE" "$((SANDBOX_PORT_BASE + 1))"
    "$((SANDBOX_PORT_BASE + 2))")
RUN_PRIMARY_PORT=4006
RUN_REPLICA_PORT=4008

# What a fresh Debian 12 machine needs to build, run and test Sluice.
# (clang and libbpf-dev build the kernel-forwarding BPF program; without
# them the build still works and Sluice forwards in user space only.)
# Every name is installed with --no-install-recommends, so whatever a
# step needs is listed here even where Debian only recommends it.
BUILD_PACKAGES=(build-essential cmake pkg-config libmariadb-dev libpcre2-dev
    libjansson-dev libmicrohttpd-dev libgnutls28-dev libcmocka-dev libssl-dev
    libcurl4-openssl-dev libsodium-dev libsystemd-dev help2man mariadb-server
    zlib1g-dev libzstd-dev libpam0g-dev
    mariadb-client clang libbpf-dev)
# (libcap2-bin: capsh, for SLUICE_DROP_CAPS in scripts/sluice-exec.)
# (python3-cryptography: PyMySQL's RSA exchange for caching_sha2_password,
# test_caching_sha2.py and test_ed25519.py; PyMySQL only suggests it.)
TEST_PACKAGES=(sysbench haproxy python3-pymysql python3-pytest prometheus
    chromium chromium-driver python3-venv python3-cryptography
    python3-pytest-timeout libcap2-bin python3-prometheus-client iptables)
# The fuzz step: clang only recommends its sanitizer and libFuzzer
# runtimes (libclang_rt.*.a), so they are named here.
FUZZ_PACKAGES=(clang libclang-rt-14-dev)
# The package test (test/system/test_package.py) and scripts/fresh-check:
# build the .deb, check it, install it into a pristine Debian root.
# (`mount` is not in Debian's minimal "apt" variant; scripts/debroot needs
# it, found missing by scripts/fresh-check --full.)
PACKAGE_PACKAGES=(dpkg-dev lintian mmdebstrap man-db mount)
# The client libraries and toolchains of the driver compatibility suite
# (test/system/test_drivers.py); mysql-connector-python comes from PyPI
# into a venv the test creates (python3-venv).
DRIVER_PACKAGES=(python3-mysqldb python3-venv libmariadb-java
    default-jdk-headless golang-go golang-github-go-sql-driver-mysql-dev
    nodejs node-mysql)

say()
{
    printf '==> %s\n' "$*"
}

die()
{
    printf 'error: %s\n' "$*" >&2
    exit 1
}

# as_root CMD...: run CMD as root (directly, or through sudo).
as_root()
{
    if [ "$(id -u)" -eq 0 ]; then
        "$@"
    elif command -v sudo >/dev/null 2>&1; then
        sudo "$@"
    else
        die "need root or sudo to run: $*"
    fi
}

# missing_packages PKG...: print the packages that are not installed.
# One dpkg-query call, so the check is cheap when everything is there.
# dpkg-query exits 1 when any name is not installed (the normal case on a
# fresh machine), so its status is deliberately ignored: under the
# callers' `set -euo pipefail` it would otherwise end this function, which
# runs in a process substitution, and the caller would read "nothing is
# missing" (test/scripts/test_lib.sh checks exactly that).
missing_packages()
{
    local installed
    installed="$( (dpkg-query -W -f='${Package} ${db:Status-Status}\n' \
        "$@" 2>/dev/null || true) | awk '$2 == "installed" { print $1 }')"
    local p
    for p in "$@"; do
        if ! grep -qx "$p" <<<"$installed"; then
            printf '%s\n' "$p"
        fi
    done
}

# ensure_packages PKG...: apt-get install what is missing; apt-get update
# only when something is missing.
ensure_packages()
{
    local list missing=()
    list="$(missing_packages "$@")" || die "cannot list installed packages"
    if [ -z "$list" ]; then
        return 0
    fi
    mapfile -t missing <<<"$list"
    if ! command -v apt-get >/dev/null 2>&1; then
        die "missing packages (${missing[*]}) and no apt-get: install them"
    fi
    say "installing: ${missing[*]}"
    as_root env DEBIAN_FRONTEND=noninteractive apt-get update -q
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -q \
        --no-install-recommends "${missing[@]}"
}

# ensure_optional PKG...: like ensure_packages, but a failure only warns.
ensure_optional()
{
    local list missing=()
    list="$(missing_packages "$@")" || die "cannot list installed packages"
    if [ -z "$list" ]; then
        return 0
    fi
    mapfile -t missing <<<"$list"
    ( ensure_packages "${missing[@]}" ) ||
        printf 'warning: could not install %s (optional)\n' \
            "${missing[*]}" >&2
}

# build DIR [CMAKE ARGS...]: configure (once) and build the tree in DIR.
build()
{
    local dir="$1"
    shift
    # Explicit returns: callers write `build ... || failed+=(...)`, which
    # turns off `set -e` in here, and a failed configure must not go on to
    # build whatever a stale build directory still holds.
    say "configuring $dir"
    cmake -S "$SLUICE_ROOT" -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
        "$@" >/dev/null || { echo "cmake configure of $dir failed" >&2;
                             return 1; }
    say "building $dir"
    cmake --build "$dir" -j"$(nproc)" || return 1
}

# pid_alive PID: true when the process exists (and is not a zombie).
pid_alive()
{
    local pid="$1"
    [ -n "$pid" ] || return 1
    kill -0 "$pid" 2>/dev/null || return 1
    local state
    state="$(awk '{ print $3 }' "/proc/$pid/stat" 2>/dev/null)"
    [ "$state" != "Z" ]
}

# stop_pid PID [TIMEOUT]: TERM, wait up to TIMEOUT seconds (default 20),
# then KILL. Returns when the process is gone.
stop_pid()
{
    local pid="$1" timeout="${2:-20}" i
    pid_alive "$pid" || return 0
    kill -TERM "$pid" 2>/dev/null || true
    for ((i = 0; i < timeout * 10; i++)); do
        pid_alive "$pid" || return 0
        sleep 0.1
    done
    printf 'warning: pid %s ignored TERM for %ss, killing\n' "$pid" \
        "$timeout" >&2
    kill -KILL "$pid" 2>/dev/null || true
    for ((i = 0; i < 50; i++)); do
        pid_alive "$pid" || return 0
        sleep 0.1
    done
}

# stop_pidfile FILE [TIMEOUT]: stop the process recorded in FILE (when it
# is still the process we started: its command line must mention the
# sandbox) and remove FILE.
stop_pidfile()
{
    local file="$1" timeout="${2:-20}" pid
    [ -f "$file" ] || return 0
    pid="$(cat "$file" 2>/dev/null)"
    if pid_alive "$pid" && tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null |
            grep -qF "$SANDBOX"; then
        stop_pid "$pid" "$timeout"
    fi
    rm -f "$file"
}

# wait_port PORT [TIMEOUT] [PID]: wait until 127.0.0.1:PORT accepts TCP
# connections. Fails early when PID is given and dies.
wait_port()
{
    local port="$1" timeout="${2:-30}" pid="${3:-}" i
    for ((i = 0; i < timeout * 10; i++)); do
        if (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
            return 0
        fi
        if [ -n "$pid" ] && ! pid_alive "$pid"; then
            return 1
        fi
        sleep 0.1
    done
    return 1
}

# render_config TEMPLATE OUT: substitute the @PLACEHOLDERS@ of a config
# template (etc/sluice.cnf) for this checkout. Extra substitutions come
# from the variables MODULE_DIR, RUN_DIR, PRIMARY_PORT, REPLICA_PORT.
render_config()
{
    local template="$1" out="$2"
    sed -e "s|@MODULE_DIR@|${MODULE_DIR}|g" \
        -e "s|@DASHBOARD_DIR@|${SLUICE_ROOT}/dashboard|g" \
        -e "s|@RUN_DIR@|${RUN_DIR}|g" \
        -e "s|@SANDBOX@|${SANDBOX}|g" \
        -e "s|@PRIMARY_PORT@|${PRIMARY_PORT:-$RUN_PRIMARY_PORT}|g" \
        -e "s|@REPLICA_PORT@|${REPLICA_PORT:-$RUN_REPLICA_PORT}|g" \
        -e "s|@DB1_PORT@|${SANDBOX_PORTS[0]}|g" \
        -e "s|@DB2_PORT@|${SANDBOX_PORTS[1]}|g" \
        -e "s|@DB3_PORT@|${SANDBOX_PORTS[2]}|g" \
        -e "s|@SERVICE_USER@|${SLUICE_SERVICE_USER}|g" \
        -e "s|@SERVICE_PASSWORD@|${SLUICE_SERVICE_PASSWORD}|g" \
        "$template" >"$out"
}
