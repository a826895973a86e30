//! The emulated SQL Server as a process, for `tests/bench/sqlserver.sh`: database `benchDB`
//! with a customers-shaped table of N rows in capture mode. It prints `port <n>`, then reads
//! commands from stdin: `changes <m>` inserts m more rows in 100-row transactions and prints
//! `done`; end of input stops it.
//!
//!     sqlserver-emulator <rows>

#![allow(clippy::unwrap_used, clippy::expect_used)] // a benchmark helper: a panic is a failed run

use std::io::{BufRead, Write};

use sluice_test_support::sqlserver::SqlServer;

fn insert(server: &SqlServer, from: u64, to: u64) {
    let mut session = server.session();
    let mut start = from;
    while start < to {
        let end = (start + 100).min(to);
        let mut sql = String::from("BEGIN TRANSACTION;");
        for i in start..end {
            sql.push_str(&format!(
                "INSERT INTO dbo.customers VALUES ({i}, N'f{i}', N'l{i}', 'e{i}@example.com', '123-45-6789', {}.{:02}, '2024-01-01 10:00:00', '1980-01-01', {}, N'note {i}');",
                i / 2,
                (i % 2) * 50,
                i % 3 == 0
            ));
        }
        sql.push_str("COMMIT");
        session.text_rows(&sql).unwrap();
        start = end;
    }
}

fn main() {
    let rows: u64 = std::env::args()
        .nth(1)
        .and_then(|n| n.parse().ok())
        .unwrap_or(200_000);
    let server = SqlServer::start("benchDB");
    server.sql(
        "CREATE TABLE dbo.customers (id int PRIMARY KEY, first_name nvarchar(255) NOT NULL, last_name nvarchar(255), \
         email varchar(255), ssn char(11), balance decimal(12,2), created_at datetime2(3), birth date, active bit, notes nvarchar(max))",
    );
    insert(&server, 1, rows + 1);
    server.enable_cdc(&["dbo.customers"]);
    println!("port {}", server.port);
    std::io::stdout().flush().unwrap();
    let mut next = rows + 1;
    for line in std::io::stdin().lock().lines() {
        let line = line.unwrap();
        if let Some(n) = line
            .strip_prefix("changes ")
            .and_then(|n| n.trim().parse::<u64>().ok())
        {
            insert(&server, next, next + n);
            next += n;
            println!("done");
            std::io::stdout().flush().unwrap();
        }
    }
}
