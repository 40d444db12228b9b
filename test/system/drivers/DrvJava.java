// SPDX-License-Identifier: Apache-2.0
/*
 * The driver scenario (scenario.md) for MariaDB Connector/J (Debian's
 * libmariadb-java), with server-side prepared statements
 * (useServerPrepStmts=true: COM_STMT_PREPARE / COM_STMT_EXECUTE):
 *
 *   java -cp mariadb-java-client.jar:DIR DrvJava HOST PORT USER PASS DB TABLE
 *
 * Transactions the JDBC way: setAutoCommit(false) ... rollback().
 * Prints the JSON report; exit 1 names the failed check.
 */
import java.nio.charset.StandardCharsets;
import java.sql.Connection;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

public class DrvJava {
    static final String TEXT1 = "4-byte: \uD83D\uDE00\uD83D\uDC2C CJK: "
        + "\u6f22\u5b57 \uD841\uDF0E \u00f1";
    static final String TEXT2 = "second \uD83C\uDF89 \u4e2d\u6587 "
        + "\ud55c\uad6d\uc5b4";
    static final String SQL_MODE = "STRICT_ALL_TABLES,NO_ENGINE_SUBSTITUTION";
    static final String TIME_ZONE = "+05:30";

    static final List<String> passed = new ArrayList<>();
    static String check = "connect";

    static class Failed extends Exception {
        Failed(String msg) { super(msg); }
    }

    static void expect(boolean cond, String what) throws Failed {
        if (!cond) {
            throw new Failed(what);
        }
    }

    static void next(String name) {
        passed.add(check);
        check = name;
    }

    static byte[] bytes256(boolean reversed) {
        byte[] b = new byte[256];
        for (int i = 0; i < 256; i++) {
            b[i] = (byte) (reversed ? 255 - i : i);
        }
        return b;
    }

    static byte[] big() {
        byte[] b = new byte[4 << 20];
        for (int i = 0; i < b.length; i++) {
            b[i] = (byte) ((i * 131 + (i >> 12)) & 0xff);
        }
        return b;
    }

    static String one(Connection c, String sql) throws SQLException {
        try (Statement st = c.createStatement();
             ResultSet rs = st.executeQuery(sql)) {
            rs.next();
            return rs.getString(1);
        }
    }

    static void insert(Connection c, String table, int id, String txt,
                       byte[] b) throws SQLException {
        try (PreparedStatement ps = c.prepareStatement(
                "INSERT INTO " + table + " (id, txt, b) VALUES (?, ?, ?)")) {
            ps.setInt(1, id);
            ps.setString(2, txt);
            ps.setBytes(3, b);
            ps.executeUpdate();
        }
    }

    static void readBack(Connection c, String table) throws Exception {
        try (PreparedStatement ps = c.prepareStatement(
                "SELECT id, txt, b FROM " + table
                + " WHERE id >= ? ORDER BY id")) {
            ps.setInt(1, 1);
            try (ResultSet rs = ps.executeQuery()) {
                String[] texts = {TEXT1, TEXT2};
                for (int i = 0; i < 2; i++) {
                    expect(rs.next(), "only " + i + " rows");
                    expect(rs.getInt(1) == i + 1, "id " + rs.getInt(1));
                    expect(texts[i].equals(rs.getString(2)),
                           "text of row " + (i + 1) + ": " + rs.getString(2));
                    expect(Arrays.equals(bytes256(i == 1), rs.getBytes(3)),
                           "blob of row " + (i + 1) + " differs");
                }
                expect(!rs.next(), "more than 2 rows");
            }
        }
    }

    static void rollback(Connection c, String table) throws Exception {
        c.setAutoCommit(false);
        insert(c, table, 3, "rolled back", new byte[] {'x'});
        c.rollback();
        c.setAutoCommit(true);
        String n3 = one(c, "SELECT COUNT(*) FROM " + table + " WHERE id = 3");
        String n = one(c, "SELECT COUNT(*) FROM " + table);
        expect(n3.equals("0") && n.equals("2"),
               "after rollback id3=" + n3 + " all=" + n);
    }

    static void blob(Connection c, String table) throws Exception {
        byte[] want = big();
        insert(c, table, 4, "big", want);
        try (PreparedStatement ps = c.prepareStatement(
                "SELECT b FROM " + table + " WHERE id = ?")) {
            ps.setInt(1, 4);
            try (ResultSet rs = ps.executeQuery()) {
                expect(rs.next(), "no row");
                byte[] got = rs.getBytes(1);
                expect(Arrays.equals(want, got),
                       "blob differs (length " + got.length + ")");
            }
        }
    }

    static void bigResult(Connection c) throws Exception {
        long n = 0;
        long sum = 0;
        try (Statement st = c.createStatement();
             ResultSet rs = st.executeQuery("SELECT seq, CONCAT('row-', seq)"
                 + " FROM seq_1_to_10000 ORDER BY seq")) {
            while (rs.next()) {
                long seq = rs.getLong(1);
                expect(("row-" + seq).equals(rs.getString(2)),
                       "bad row " + seq);
                n++;
                sum += seq;
            }
        }
        expect(n == 10000, n + " rows");
        expect(sum == 50005000L, "sum " + sum);
    }

    static List<String> rows(ResultSet rs) throws SQLException {
        List<String> out = new ArrayList<>();
        while (rs.next()) {
            out.add(rs.getLong(1) + ":" + rs.getString(2));
        }
        rs.close();
        return out;
    }

    static void procedure(Connection c, String db) throws Exception {
        try (Statement st = c.createStatement()) {
            expect(st.execute("CALL " + db + ".drv_two_results()"),
                   "no result set");
            List<String> first = rows(st.getResultSet());
            expect(st.getMoreResults(), "no second result set");
            List<String> second = rows(st.getResultSet());
            expect(first.equals(List.of("1:first")), "result 1: " + first);
            expect(second.equals(List.of("1:s1", "2:s2", "3:s3")),
                   "result 2: " + second);
        }
    }

    static void syntaxError(Connection c) throws Exception {
        try (Statement st = c.createStatement()) {
            st.execute("SELEC 1");
        } catch (SQLException e) {
            expect(e.getErrorCode() == 1064, "error " + e.getErrorCode()
                   + ": " + e.getMessage());
            return;
        }
        throw new Failed("no error");
    }

    static void sessionKept(Connection c) throws Exception {
        try (Statement st = c.createStatement();
             ResultSet rs = st.executeQuery("SELECT @v, @@session.sql_mode,"
                 + " @@session.time_zone")) {
            rs.next();
            String got = rs.getString(1) + "|" + rs.getString(2) + "|"
                + rs.getString(3);
            expect(got.equals("42|" + SQL_MODE + "|" + TIME_ZONE),
                   "session state " + got);
        }
        expect("1".equals(one(c, "SELECT 1")), "SELECT 1");
    }

    static void scenario(String[] a) throws Exception {
        String url = "jdbc:mariadb://" + a[0] + ":" + a[1] + "/" + a[4]
            + "?useServerPrepStmts=true&connectTimeout=10000"
            + ("1".equals(System.getenv("DRV_COMPRESS"))
               ? "&useCompression=true" : "");
        String table = a[5];
        try (Connection c = DriverManager.getConnection(url, a[2], a[3])) {
            next("charset");
            String cs = one(c, "SELECT CONCAT_WS(',', @@character_set_client,"
                + " @@character_set_connection, @@character_set_results)");
            expect(cs.equals("utf8mb4,utf8mb4,utf8mb4"), cs);
            next("default_db");
            String db = one(c, "SELECT DATABASE()");
            expect(a[4].equals(db), "DATABASE() is " + db);
            next("session_set");
            try (Statement st = c.createStatement()) {
                st.execute("SET @v = 42");
                st.execute("SET SESSION sql_mode = '" + SQL_MODE + "'");
                st.execute("SET SESSION time_zone = '" + TIME_ZONE + "'");
                next("create_table");
                st.execute("DROP TABLE IF EXISTS " + table);
                st.execute("CREATE TABLE " + table + " (id INT PRIMARY KEY,"
                    + " txt VARCHAR(64) CHARACTER SET utf8mb4, b LONGBLOB)");
            }
            next("insert_params");
            insert(c, table, 1, TEXT1, bytes256(false));
            insert(c, table, 2, TEXT2, bytes256(true));
            next("read_back");
            readBack(c, table);
            next("rollback");
            rollback(c, table);
            next("blob_4mib");
            blob(c, table);
            next("big_result");
            bigResult(c);
            next("procedure");
            procedure(c, a[4]);
            next("syntax_error");
            syntaxError(c);
            next("session_kept");
            sessionKept(c);
            next(null);
        }
    }

    static String quote(String s) {
        StringBuilder b = new StringBuilder("\"");
        for (char ch : s.toCharArray()) {
            if (ch == '"' || ch == '\\') {
                b.append('\\').append(ch);
            } else if (ch < 0x20 || ch > 0x7e) {
                b.append(String.format("\\u%04x", (int) ch));
            } else {
                b.append(ch);
            }
        }
        return b.append('"').toString();
    }

    static String report(String failed, String error) {
        StringBuilder b = new StringBuilder("{\"driver\": \"jdbc\", ");
        b.append("\"passed\": [");
        for (int i = 0; i < passed.size(); i++) {
            b.append(i > 0 ? ", " : "").append(quote(passed.get(i)));
        }
        b.append("]");
        if (failed != null) {
            b.append(", \"failed\": ").append(quote(failed));
            b.append(", \"error\": ").append(quote(error));
        }
        return b.append("}").toString();
    }

    public static void main(String[] args) {
        if (args.length != 6) {
            System.err.println("usage: DrvJava HOST PORT USER PASS DB TABLE");
            System.exit(2);
        }
        try {
            scenario(args);
        } catch (Exception e) {
            System.out.println(report(check, e.toString()));
            System.exit(1);
        }
        System.out.println(report(null, null));
    }
}
