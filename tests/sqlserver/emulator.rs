//! The emulator through FreeTDS's `tsql` (Debian's `freetds-bin`): what another SQL Server
//! client reads from it is what the tests mean, so the emulator is checked against more than
//! the client Sluice uses.

use sluice_test_support::sqlserver::SqlServer;

/// Runs `sql` through `tsql` ([`SqlServer::tsql`]); its output lines, trailing blanks cut.
fn tsql(server: &SqlServer, sql: &str) -> Vec<String> {
    server
        .tsql(sql)
        .into_iter()
        .map(|l| l.trim_end().to_string())
        .collect()
}

#[test]
fn tsql_reads_rows_of_every_type_the_emulator_sends() {
    let server = SqlServer::start("typesdb");
    server.sql(
        "CREATE TABLE dbo.t (id int PRIMARY KEY, b bit, ti tinyint, si smallint, bi bigint, r real, f float, \
         d decimal(12,3), m money, c char(3), vc varchar(20), nvc nvarchar(20), nmax nvarchar(max), \
         vb varbinary(8), g uniqueidentifier, dt date, tm time(3), dt2 datetime2(7), dto datetimeoffset(2), \
         dtm datetime, sdt smalldatetime)",
    );
    server.sql(
        "INSERT INTO dbo.t VALUES (1, 1, 200, -3, 9007199254740993, 1.5, 2.25, -123456789.125, 12.3456, 'abc', \
         'varchar', N'snow ☃', N'max text', 0x0102FF, '6F9619FF-8B86-D011-B42D-00C04FC964FF', '2024-03-04', \
         '05:06:07.123', '2024-03-04 05:06:07.1234567', '2024-03-04 05:06:07.12 +02:00', '2024-03-04 05:06:07.123', \
         '2024-03-04 05:06:00')",
    );
    server.sql("INSERT INTO dbo.t (id) VALUES (2)");
    let lines = tsql(&server, "SELECT * FROM dbo.t ORDER BY id");
    assert_eq!(lines[0].split('\t').count(), 21, "{lines:?}");
    let row: Vec<&str> = lines[1].split('\t').collect();
    assert_eq!(
        &row[..9],
        [
            "1",
            "1",
            "200",
            "-3",
            "9007199254740993",
            "1.5",
            "2.25",
            "-123456789.125",
            "12.3456"
        ],
        "{lines:?}"
    );
    assert_eq!(&row[9..12], ["abc", "varchar", "snow ☃"], "{lines:?}");
    assert_eq!(row[13], "0102ff");
    assert_eq!(row[14], "6F9619FF-8B86-D011-B42D-00C04FC964FF");
    // tsql prints dates and times to the minute (its default locale format): the fractions
    // of a second are checked through Sluice's client in the source's tests.
    assert_eq!(
        &row[15..],
        [
            "Mar  4 2024 12:00AM",
            "Jan  1 1900 05:06AM",
            "Mar  4 2024 05:06AM",
            "Mar  4 2024 05:06AM",
            "Mar  4 2024 05:06AM",
            "Mar  4 2024 05:06AM"
        ],
        "{row:?}"
    );
    let nulls: Vec<&str> = lines[2].split('\t').collect();
    assert_eq!(nulls[0], "2");
    assert!(nulls[1..].iter().all(|v| *v == "NULL"), "{nulls:?}");
}

#[test]
fn change_tables_fill_at_commit_with_one_commit_lsn_per_transaction() {
    let server = SqlServer::start("cdcdb");
    server.sql("CREATE TABLE dbo.customers (id int PRIMARY KEY, name nvarchar(50))");
    server.enable_cdc(&["dbo.customers"]);
    server.sql(
        "BEGIN TRANSACTION; INSERT INTO dbo.customers VALUES (1, N'a'); INSERT INTO dbo.customers VALUES (2, N'b'); COMMIT",
    );
    server.sql("UPDATE dbo.customers SET name = N'c' WHERE id = 1");
    server.sql("DELETE FROM dbo.customers WHERE id = 2");
    let lines = tsql(
        &server,
        "SELECT __$start_lsn, __$seqval, __$operation, id, name FROM cdc.dbo_customers_CT \
         ORDER BY __$start_lsn, __$seqval, __$operation",
    );
    let rows: Vec<Vec<&str>> = lines[1..].iter().map(|l| l.split('\t').collect()).collect();
    assert_eq!(rows.len(), 5, "{lines:?}");
    let ops: Vec<&str> = rows.iter().map(|r| r[2]).collect();
    assert_eq!(ops, ["2", "2", "3", "4", "1"]);
    // One commit LSN for the two inserts, later ones for the update and the delete; the
    // update's two rows share a sequence value.
    assert_eq!(rows[0][0], rows[1][0]);
    assert!(rows[2][0] > rows[1][0] && rows[4][0] > rows[2][0]);
    assert_eq!(rows[2][0], rows[3][0]);
    assert_eq!(rows[2][1], rows[3][1]);
    assert!(rows[0][1] < rows[1][1]);
    assert_eq!((rows[2][4], rows[3][4]), ("a", "c"));
    // The same LSNs through the CDC functions, as Debezium's function query mode reads them.
    let max = tsql(&server, "SELECT sys.fn_cdc_get_max_lsn()");
    // (An expression's column has no name: no header line.)
    assert_eq!(max.last().unwrap(), rows[4][0]);
    let changes = tsql(
        &server,
        "SELECT count(*) FROM cdc.fn_cdc_get_all_changes_dbo_customers(sys.fn_cdc_get_min_lsn(N'dbo_customers'), sys.fn_cdc_get_max_lsn(), N'all update old')",
    );
    assert_eq!(changes.last().unwrap(), "5", "{changes:?}");
}

/// `sys.partitions` answers another client as the source reads it: a clustered index's
/// (`index_id` 1) or a heap's (0) row count per table, following the rows written.
#[test]
fn tsql_reads_the_row_counts_of_sys_partitions() {
    let server = SqlServer::start("partitionsdb");
    server.sql("CREATE TABLE dbo.keyed (id int PRIMARY KEY); CREATE TABLE dbo.heap (v int)");
    server.sql("INSERT INTO dbo.keyed VALUES (1); INSERT INTO dbo.heap VALUES (1); INSERT INTO dbo.heap VALUES (2)");
    let counts = |server: &SqlServer| {
        tsql(
            server,
            "SELECT OBJECT_NAME(p.object_id), p.index_id, p.rows FROM sys.partitions AS p ORDER BY 1",
        )
    };
    assert_eq!(counts(&server)[1..], ["heap\t0\t2", "keyed\t1\t1"]);
    server.sql("DELETE FROM dbo.heap WHERE v = 1; INSERT INTO dbo.keyed VALUES (2)");
    assert_eq!(counts(&server)[1..], ["heap\t0\t1", "keyed\t1\t2"]);
}
