// SPDX-License-Identifier: Apache-2.0
// The driver scenario (scenario.md) for go-sql-driver/mysql (Debian's
// golang-github-go-sql-driver-mysql-dev, built in GOPATH mode):
//
//	drv_go HOST PORT USER PASS DB TABLE
//
// Queries with arguments use server-side prepared statements (the driver
// prepares them, interpolateParams is off). database/sql is a pool, so
// the scenario pins one connection (db.Conn) to stay in one session.
// Prints the JSON report; exit 1 names the failed check.
package main

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"os"

	"github.com/go-sql-driver/mysql"
)

const (
	text1    = "4-byte: \U0001F600\U0001F42C CJK: \u6f22\u5b57 \U0002070E \u00f1"
	text2    = "second \U0001F389 \u4e2d\u6587 \ud55c\uad6d\uc5b4"
	sqlMode  = "STRICT_ALL_TABLES,NO_ENGINE_SUBSTITUTION"
	timeZone = "+05:30"
)

var ctx = context.Background()

func bytes256(reversed bool) []byte {
	b := make([]byte, 256)
	for i := range b {
		if reversed {
			b[i] = byte(255 - i)
		} else {
			b[i] = byte(i)
		}
	}
	return b
}

func big() []byte {
	b := make([]byte, 4<<20)
	for i := range b {
		b[i] = byte((i*131 + (i >> 12)) & 0xff)
	}
	return b
}

func one(c *sql.Conn, q string, args ...interface{}) (string, error) {
	var s string
	err := c.QueryRowContext(ctx, q, args...).Scan(&s)
	return s, err
}

func exec(c *sql.Conn, qs ...string) error {
	for _, q := range qs {
		if _, err := c.ExecContext(ctx, q); err != nil {
			return err
		}
	}
	return nil
}

func insert(c *sql.Conn, table string, id int, txt string, b []byte) error {
	_, err := c.ExecContext(ctx, "INSERT INTO "+table+
		" (id, txt, b) VALUES (?, ?, ?)", id, txt, b)
	return err
}

func readBack(c *sql.Conn, table string) error {
	rows, err := c.QueryContext(ctx, "SELECT id, txt, b FROM "+table+
		" WHERE id >= ? ORDER BY id", 1)
	if err != nil {
		return err
	}
	defer rows.Close()
	texts := []string{text1, text2}
	n := 0
	for rows.Next() {
		var id int
		var txt string
		var b []byte
		if err := rows.Scan(&id, &txt, &b); err != nil {
			return err
		}
		if n >= 2 || id != n+1 || txt != texts[n] ||
			!bytes.Equal(b, bytes256(n == 1)) {
			return fmt.Errorf("row %d differs: id %d text %q", n+1, id, txt)
		}
		n++
	}
	if n != 2 {
		return fmt.Errorf("%d rows", n)
	}
	return rows.Err()
}

func rollback(c *sql.Conn, table string) error {
	tx, err := c.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if _, err := tx.Exec("INSERT INTO "+table+
		" (id, txt, b) VALUES (?, ?, ?)", 3, "rolled back", []byte("x")); err != nil {
		return err
	}
	if err := tx.Rollback(); err != nil {
		return err
	}
	n3, err := one(c, "SELECT COUNT(*) FROM "+table+" WHERE id = 3")
	if err != nil {
		return err
	}
	n, err := one(c, "SELECT COUNT(*) FROM "+table)
	if err != nil {
		return err
	}
	if n3 != "0" || n != "2" {
		return fmt.Errorf("after rollback id3=%s all=%s", n3, n)
	}
	return nil
}

func blob(c *sql.Conn, table string) error {
	want := big()
	if err := insert(c, table, 4, "big", want); err != nil {
		return err
	}
	var got []byte
	err := c.QueryRowContext(ctx, "SELECT b FROM "+table+" WHERE id = ?",
		4).Scan(&got)
	if err != nil {
		return err
	}
	if !bytes.Equal(got, want) {
		return fmt.Errorf("blob differs (length %d)", len(got))
	}
	return nil
}

func bigResult(c *sql.Conn) error {
	rows, err := c.QueryContext(ctx, "SELECT seq, CONCAT('row-', seq) "+
		"FROM seq_1_to_10000 ORDER BY seq")
	if err != nil {
		return err
	}
	defer rows.Close()
	var n, sum int64
	for rows.Next() {
		var seq int64
		var txt string
		if err := rows.Scan(&seq, &txt); err != nil {
			return err
		}
		if txt != fmt.Sprintf("row-%d", seq) {
			return fmt.Errorf("bad row %d: %q", seq, txt)
		}
		n++
		sum += seq
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if n != 10000 || sum != 50005000 {
		return fmt.Errorf("%d rows, sum %d", n, sum)
	}
	return nil
}

func collect(rows *sql.Rows) ([]string, error) {
	var out []string
	for rows.Next() {
		var a int
		var b string
		if err := rows.Scan(&a, &b); err != nil {
			return nil, err
		}
		out = append(out, fmt.Sprintf("%d:%s", a, b))
	}
	return out, rows.Err()
}

func procedure(c *sql.Conn, db string) error {
	rows, err := c.QueryContext(ctx, "CALL "+db+".drv_two_results()")
	if err != nil {
		return err
	}
	defer rows.Close()
	first, err := collect(rows)
	if err != nil {
		return err
	}
	if !rows.NextResultSet() {
		return errors.New("no second result set")
	}
	second, err := collect(rows)
	if err != nil {
		return err
	}
	if fmt.Sprint(first) != "[1:first]" ||
		fmt.Sprint(second) != "[1:s1 2:s2 3:s3]" {
		return fmt.Errorf("results %v %v", first, second)
	}
	return nil
}

func syntaxError(c *sql.Conn) error {
	_, err := c.ExecContext(ctx, "SELEC 1")
	var me *mysql.MySQLError
	if err == nil {
		return errors.New("no error")
	}
	if !errors.As(err, &me) || me.Number != 1064 {
		return fmt.Errorf("error %v", err)
	}
	return nil
}

func sessionKept(c *sql.Conn) error {
	var v, mode, tz string
	err := c.QueryRowContext(ctx, "SELECT @v, @@session.sql_mode, "+
		"@@session.time_zone").Scan(&v, &mode, &tz)
	if err != nil {
		return err
	}
	if v != "42" || mode != sqlMode || tz != timeZone {
		return fmt.Errorf("session state %s|%s|%s", v, mode, tz)
	}
	s, err := one(c, "SELECT 1")
	if err != nil || s != "1" {
		return fmt.Errorf("SELECT 1: %v", err)
	}
	return nil
}

type step struct {
	name string
	run  func() error
}

func scenario(c *sql.Conn, db, table string) []step {
	return []step{
		{"charset", func() error {
			cs, err := one(c, "SELECT CONCAT_WS(',', @@character_set_client,"+
				" @@character_set_connection, @@character_set_results)")
			if err == nil && cs != "utf8mb4,utf8mb4,utf8mb4" {
				err = errors.New(cs)
			}
			return err
		}},
		{"default_db", func() error {
			got, err := one(c, "SELECT DATABASE()")
			if err == nil && got != db {
				err = fmt.Errorf("DATABASE() is %q", got)
			}
			return err
		}},
		{"session_set", func() error {
			return exec(c, "SET @v = 42",
				"SET SESSION sql_mode = '"+sqlMode+"'",
				"SET SESSION time_zone = '"+timeZone+"'")
		}},
		{"create_table", func() error {
			return exec(c, "DROP TABLE IF EXISTS "+table,
				"CREATE TABLE "+table+" (id INT PRIMARY KEY, "+
					"txt VARCHAR(64) CHARACTER SET utf8mb4, b LONGBLOB)")
		}},
		{"insert_params", func() error {
			if err := insert(c, table, 1, text1, bytes256(false)); err != nil {
				return err
			}
			return insert(c, table, 2, text2, bytes256(true))
		}},
		{"read_back", func() error { return readBack(c, table) }},
		{"rollback", func() error { return rollback(c, table) }},
		{"blob_4mib", func() error { return blob(c, table) }},
		{"big_result", func() error { return bigResult(c) }},
		{"procedure", func() error { return procedure(c, db) }},
		{"syntax_error", func() error { return syntaxError(c) }},
		{"session_kept", func() error { return sessionKept(c) }},
	}
}

func report(passed []string, failed string, err error) int {
	out := map[string]interface{}{"driver": "go", "passed": passed}
	if failed != "" {
		out["failed"] = failed
		out["error"] = err.Error()
	}
	j, _ := json.Marshal(out)
	fmt.Println(string(j))
	if failed != "" {
		return 1
	}
	return 0
}

func run(a []string) int {
	cfg := mysql.NewConfig()
	cfg.User, cfg.Passwd, cfg.DBName = a[2], a[3], a[4]
	cfg.Net, cfg.Addr = "tcp", a[0]+":"+a[1]
	cfg.Collation = "utf8mb4_general_ci"
	cfg.Params = map[string]string{"charset": "utf8mb4"}
	cfg.MaxAllowedPacket = 64 << 20
	db, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		return report([]string{}, "connect", err)
	}
	defer db.Close()
	c, err := db.Conn(ctx)
	if err == nil {
		err = c.PingContext(ctx)
	}
	if err != nil {
		return report([]string{}, "connect", err)
	}
	defer c.Close()
	passed := []string{"connect"}
	for _, s := range scenario(c, a[4], a[5]) {
		if err := s.run(); err != nil {
			return report(passed, s.name, err)
		}
		passed = append(passed, s.name)
	}
	return report(passed, "", nil)
}

func main() {
	if len(os.Args) != 7 {
		fmt.Fprintln(os.Stderr, "usage: drv_go HOST PORT USER PASS DB TABLE")
		os.Exit(2)
	}
	os.Exit(run(os.Args[1:]))
}
