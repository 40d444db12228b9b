// SPDX-License-Identifier: Apache-2.0
// The driver scenario (scenario.md) for Node.js with Debian's node-mysql
// (mysqljs/mysql 2.18; mysql2 is not packaged in Debian, see
// docs/design.md "Driver compatibility"):
//
//   node drv_node.js HOST PORT USER PASS DB TABLE
//
// mysqljs binds parameters on the client ('?' placeholders escaped into
// the COM_QUERY text, buffers as X'..'); it has no server-side prepared
// statements. Prints the JSON report; exit 1 names the failed check.
'use strict';

const mysql = require('mysql');

const TEXT1 = '4-byte: \u{1F600}\u{1F42C} CJK: \u6f22\u5b57 \u{2070E} \u00f1';
const TEXT2 = 'second \u{1F389} \u4e2d\u6587 \ud55c\uad6d\uc5b4';
const SQL_MODE = 'STRICT_ALL_TABLES,NO_ENGINE_SUBSTITUTION';
const TIME_ZONE = '+05:30';

function bytes256(reversed) {
  const b = Buffer.alloc(256);
  for (let i = 0; i < 256; i++) {
    b[i] = reversed ? 255 - i : i;
  }
  return b;
}

function big() {
  const b = Buffer.alloc(4 << 20);
  for (let i = 0; i < b.length; i++) {
    b[i] = (i * 131 + (i >> 12)) & 0xff;
  }
  return b;
}

function expect(cond, what) {
  if (!cond) {
    throw new Error(what);
  }
}

async function scenario(conn, db, table) {
  const q = (sql, args) => new Promise((resolve, reject) => {
    conn.query(sql, args, (err, res) => (err ? reject(err) : resolve(res)));
  });
  const one = async (sql, args) => {
    const rows = await q(sql, args);
    return String(Object.values(rows[0])[0]);
  };
  const ins = 'INSERT INTO ' + table + ' (id, txt, b) VALUES (?, ?, ?)';
  const steps = [
    ['charset', async () => {
      const cs = await one('SELECT CONCAT_WS(\',\', @@character_set_client,' +
        ' @@character_set_connection, @@character_set_results) AS c');
      expect(cs === 'utf8mb4,utf8mb4,utf8mb4', cs);
    }],
    ['default_db', async () => {
      const got = await one('SELECT DATABASE() AS d');
      expect(got === db, 'DATABASE() is ' + got);
    }],
    ['session_set', async () => {
      await q('SET @v = 42');
      await q('SET SESSION sql_mode = ?', [SQL_MODE]);
      await q('SET SESSION time_zone = ?', [TIME_ZONE]);
    }],
    ['create_table', async () => {
      await q('DROP TABLE IF EXISTS ' + table);
      await q('CREATE TABLE ' + table + ' (id INT PRIMARY KEY, ' +
        'txt VARCHAR(64) CHARACTER SET utf8mb4, b LONGBLOB)');
    }],
    ['insert_params', async () => {
      await q(ins, [1, TEXT1, bytes256(false)]);
      await q(ins, [2, TEXT2, bytes256(true)]);
    }],
    ['read_back', async () => {
      const rows = await q('SELECT id, txt, b FROM ' + table +
        ' WHERE id >= ? ORDER BY id', [1]);
      expect(rows.length === 2, rows.length + ' rows');
      [[1, TEXT1, false], [2, TEXT2, true]].forEach(([id, txt, rev], i) => {
        expect(rows[i].id === id && rows[i].txt === txt,
          'row ' + id + ': ' + JSON.stringify(rows[i].txt));
        expect(bytes256(rev).equals(rows[i].b), 'blob of row ' + id);
      });
    }],
    ['rollback', async () => {
      await new Promise((res, rej) =>
        conn.beginTransaction((e) => (e ? rej(e) : res())));
      await q(ins, [3, 'rolled back', Buffer.from('x')]);
      await new Promise((res, rej) =>
        conn.rollback((e) => (e ? rej(e) : res())));
      const n3 = await one('SELECT COUNT(*) FROM ' + table + ' WHERE id = 3');
      const n = await one('SELECT COUNT(*) FROM ' + table);
      expect(n3 === '0' && n === '2', 'after rollback id3=' + n3 +
        ' all=' + n);
    }],
    ['blob_4mib', async () => {
      const want = big();
      await q(ins, [4, 'big', want]);
      const rows = await q('SELECT b FROM ' + table + ' WHERE id = ?', [4]);
      expect(rows.length === 1, rows.length + ' rows');
      expect(want.equals(rows[0].b), 'blob differs (length ' +
        rows[0].b.length + ')');
    }],
    ['big_result', async () => {
      const rows = await q('SELECT seq, CONCAT(\'row-\', seq) AS t ' +
        'FROM seq_1_to_10000 ORDER BY seq');
      let sum = 0;
      for (const r of rows) {
        expect(r.t === 'row-' + r.seq, 'bad row ' + r.seq);
        sum += r.seq;
      }
      expect(rows.length === 10000 && sum === 50005000,
        rows.length + ' rows, sum ' + sum);
    }],
    ['procedure', async () => {
      const res = await q('CALL ' + db + '.drv_two_results()');
      // [result 1, result 2, OkPacket of the CALL]
      expect(Array.isArray(res) && res.length === 3, 'results: ' +
        JSON.stringify(res));
      const first = res[0].map((r) => r.a + ':' + r.b).join(' ');
      const second = res[1].map((r) => Object.values(r).join(':')).join(' ');
      expect(first === '1:first', 'result 1: ' + first);
      expect(second === '1:s1 2:s2 3:s3', 'result 2: ' + second);
    }],
    ['syntax_error', async () => {
      try {
        await q('SELEC 1');
      } catch (e) {
        expect(e.errno === 1064, 'error ' + e.errno + ': ' + e.message);
        return;
      }
      throw new Error('no error');
    }],
    ['session_kept', async () => {
      const rows = await q('SELECT @v AS v, @@session.sql_mode AS m, ' +
        '@@session.time_zone AS z');
      const got = [String(rows[0].v), rows[0].m, rows[0].z].join('|');
      expect(got === ['42', SQL_MODE, TIME_ZONE].join('|'),
        'session state ' + got);
      expect((await one('SELECT 1 AS one')) === '1', 'SELECT 1');
    }],
  ];
  const passed = ['connect'];
  for (const [name, fn] of steps) {
    try {
      await fn();
    } catch (e) {
      return {passed, failed: name, error: String(e && e.message || e)};
    }
    passed.push(name);
  }
  return {passed};
}

async function main(a) {
  const conn = mysql.createConnection({
    host: a[0], port: Number(a[1]), user: a[2], password: a[3],
    database: a[4], charset: 'UTF8MB4_GENERAL_CI', connectTimeout: 10000,
  });
  let report;
  try {
    await new Promise((res, rej) => conn.connect((e) => (e ? rej(e) : res())));
    report = await scenario(conn, a[4], a[5]);
  } catch (e) {
    report = {passed: [], failed: 'connect', error: String(e.message || e)};
  }
  conn.destroy();
  console.log(JSON.stringify(Object.assign({driver: 'node'}, report)));
  process.exit(report.failed ? 1 : 0);
}

if (process.argv.length !== 8) {
  console.error('usage: node drv_node.js HOST PORT USER PASS DB TABLE');
  process.exit(2);
}
main(process.argv.slice(2));
