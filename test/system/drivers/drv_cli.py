# SPDX-License-Identifier: Apache-2.0
"""The driver scenario (scenario.md) for the `mariadb` command-line client:

    drv_cli.py HOST PORT USER PASS DB TABLE

The whole scenario is one script fed to ONE `mariadb --batch --force`
process, so it is one session and the session goes on after the syntax
error. The CLI has no parameter binding: values are SQL literals, blobs
hex literals (X'..') on the way in and HEX() on the way out. Each check's
output follows a marker row `#check NAME`; errors (stderr) are mapped to
their check by line number. Prints the JSON report; exit 1 names the
failed check.
"""

import json
import os
import re
import subprocess
import sys

TEXT1 = "4-byte: \U0001F600\U0001F42C CJK: \u6f22\u5b57 \U0002070E \u00f1"
TEXT2 = "second \U0001F389 \u4e2d\u6587 \ud55c\uad6d\uc5b4"
BYTES256 = bytes(range(256))
BIG = bytes(((i * 131 + (i >> 12)) & 0xFF) for i in range(4 << 20))
SQL_MODE = "STRICT_ALL_TABLES,NO_ENGINE_SUBSTITUTION"
TIME_ZONE = "+05:30"
CHECKS = ["connect", "charset", "default_db", "session_set", "create_table",
          "insert_params", "read_back", "rollback", "blob_4mib",
          "big_result", "procedure", "syntax_error", "session_kept"]


def script(db, table):
    """(check, [statements]) in order."""
    ins = f"INSERT INTO {table} (id, txt, b) VALUES"
    return [
        ("connect", ["SELECT 1"]),
        ("charset", ["SELECT @@character_set_client, "
                     "@@character_set_connection, @@character_set_results"]),
        ("default_db", ["SELECT DATABASE()"]),
        ("session_set", ["SET @v = 42",
                         f"SET SESSION sql_mode = '{SQL_MODE}'",
                         f"SET SESSION time_zone = '{TIME_ZONE}'"]),
        ("create_table", [f"DROP TABLE IF EXISTS {table}",
                          f"CREATE TABLE {table} (id INT PRIMARY KEY, "
                          "txt VARCHAR(64) CHARACTER SET utf8mb4, "
                          "b LONGBLOB)"]),
        ("insert_params", [f"{ins} (1, '{TEXT1}', X'{BYTES256.hex()}')",
                           f"{ins} (2, '{TEXT2}', "
                           f"X'{BYTES256[::-1].hex()}')"]),
        ("read_back", [f"SELECT id, txt, HEX(b) FROM {table} ORDER BY id"]),
        ("rollback", ["START TRANSACTION",
                      f"{ins} (3, 'rolled back', X'78')", "ROLLBACK",
                      f"SELECT COUNT(*) FROM {table} WHERE id = 3",
                      f"SELECT COUNT(*) FROM {table}"]),
        ("blob_4mib", [f"{ins} (4, 'big', X'{BIG.hex()}')",
                       f"SELECT HEX(b) FROM {table} WHERE id = 4"]),
        ("big_result", ["SELECT seq, CONCAT('row-', seq) FROM "
                        "seq_1_to_10000 ORDER BY seq"]),
        ("procedure", [f"CALL {db}.drv_two_results()"]),
        ("syntax_error", ["SELEC 1"]),
        ("session_kept", ["SELECT @v, @@session.sql_mode, "
                          "@@session.time_zone", "SELECT 1"]),
    ]


def expected(table):
    hex256 = BYTES256.hex().upper()
    return {
        "connect": ["1"],
        "charset": ["utf8mb4\tutf8mb4\tutf8mb4"],
        "default_db": None,   # filled in by main()
        "session_set": [],
        "create_table": [],
        "insert_params": [],
        "read_back": [f"1\t{TEXT1}\t{hex256}",
                      f"2\t{TEXT2}\t{BYTES256[::-1].hex().upper()}"],
        "rollback": ["0", "2"],
        "blob_4mib": [BIG.hex().upper()],
        "big_result": [f"{i}\trow-{i}" for i in range(1, 10001)],
        "procedure": ["1\tfirst", "1\ts1", "2\ts2", "3\ts3"],
        "syntax_error": [],
        "session_kept": [f"42\t{SQL_MODE}\t{TIME_ZONE}", "1"],
    }


def run(argv):
    host, port, user, password, db, table = argv
    lines, owner = [], {}
    for check, stmts in script(db, table):
        lines.append(f"SELECT '#check {check}';")
        for s in stmts:
            owner[len(lines) + 1] = check
            lines.append(s + ";")
    cmd = ["mariadb", "--no-defaults", f"-h{host}", f"-P{port}",
           "--protocol=tcp", f"-u{user}", f"-p{password}", f"-D{db}",
           "--batch", "--skip-column-names", "--force",
           "--default-character-set=utf8mb4", "--max-allowed-packet=64M",
           "--connect-timeout=10"]
    if os.environ.get("DRV_COMPRESS") == "1":
        cmd.append("--compress")
    proc = subprocess.run(cmd, input="\n".join(lines) + "\n",
                          capture_output=True, text=True, timeout=120)
    return proc, owner


def main(argv):
    if len(argv) != 7:
        raise SystemExit(f"usage: {argv[0]} HOST PORT USER PASS DB TABLE")
    db, table = argv[5], argv[6]
    proc, owner = run(argv[1:])
    want = expected(table)
    want["default_db"] = [db]
    got, cur = {}, None
    for line in proc.stdout.split("\n"):
        m = re.fullmatch(r"#check (\w+)", line)
        if m:
            cur = m.group(1)
            got[cur] = []
        elif cur is not None and line != "":
            got[cur].append(line)
    errors = {}
    for m in re.finditer(r"ERROR (\d+) \(\w+\) at line (\d+): (.*)",
                         proc.stderr):
        errors.setdefault(owner.get(int(m.group(2)), "?"),
                          (int(m.group(1)), m.group(3)))
    report = {"driver": "cli", "passed": []}
    for check in CHECKS:
        if check == "syntax_error":
            ok = errors.get(check, (None,))[0] == 1064
            detail = errors.get(check, "no error")
        else:
            ok = check not in errors and got.get(check) == want[check]
            detail = errors.get(check) or (
                f"output {str(got.get(check))[:300]}")
        if not ok:
            report["failed"] = check
            report["error"] = f"{detail}; stderr {proc.stderr[:300]}"
            break
        report["passed"].append(check)
    print(json.dumps(report))
    return 1 if "failed" in report else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
