//! The quickstart's demo: an inventory database (customers, products, orders; a few thousand
//! rows) in capture mode, and a writer that keeps changing it for a while.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use rusqlite::{params, Connection};

use super::capture;

/// Why the demo database cannot be made or changed.
#[derive(Debug, thiserror::Error)]
pub enum DemoError {
    /// A statement failed (`what`: what it was for).
    #[error("{what}: {source}")]
    Sqlite {
        what: &'static str,
        #[source]
        source: rusqlite::Error,
    },
    /// A table cannot be put into capture mode.
    #[error(transparent)]
    Capture(#[from] capture::CaptureError),
}

/// The error of a statement made for `what`.
fn sql(what: &'static str) -> impl FnOnce(rusqlite::Error) -> DemoError {
    move |source| DemoError::Sqlite { what, source }
}

/// Rows made by [`create_inventory`].
pub const CUSTOMERS: i64 = 1000;
/// Products.
pub const PRODUCTS: i64 = 200;
/// Orders.
pub const ORDERS: i64 = 3000;

/// A small deterministic generator (no dependency for a demo).
struct Lcg(u64);

impl Lcg {
    fn next(&mut self, n: i64) -> i64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((self.0 >> 33) % n.max(1) as u64) as i64
    }
}

const FIRST: [&str; 8] = [
    "Anne", "Sally", "George", "Edward", "Kenji", "Amara", "Lucía", "Omar",
];
const LAST: [&str; 8] = [
    "Kretchmar",
    "Thomas",
    "Bailey",
    "Walker",
    "Sato",
    "Okafor",
    "García",
    "Haddad",
];

/// Creates the database with its tables and rows, and puts the tables into capture mode.
pub fn create_inventory(path: &Path) -> Result<(), DemoError> {
    let mut conn = Connection::open(path).map_err(sql("creating the database"))?;
    conn.execute_batch(
        "pragma journal_mode = wal;
         create table customers (id integer primary key, first_name text not null, last_name text not null, email text not null, phone text, created_at datetime not null);
         create table products (id integer primary key, name varchar(80) not null, description text, price decimal(10,2) not null, weight real);
         create table orders (id integer primary key, order_date date not null, purchaser integer not null references customers(id), product_id integer not null references products(id), quantity int not null);",
    )
    .map_err(sql("creating the tables"))?;
    let mut rng = Lcg(42);
    let tx = conn.transaction().map_err(sql("beginning a transaction"))?;
    for id in 1..=CUSTOMERS {
        let (f, l) = (FIRST[rng.next(8) as usize], LAST[rng.next(8) as usize]);
        tx.execute(
            "insert into customers values (?1, ?2, ?3, ?4, ?5, ?6)",
            params![
                id,
                f,
                l,
                format!("{}.{}{id}@example.com", f.to_lowercase(), l.to_lowercase()),
                format!("+1-555-{:04}", rng.next(10_000)),
                format!(
                    "2024-{:02}-{:02} 09:{:02}:00",
                    1 + rng.next(12),
                    1 + rng.next(28),
                    rng.next(60)
                )
            ],
        )
        .map_err(sql("inserting a row"))?;
    }
    for id in 1..=PRODUCTS {
        tx.execute(
            "insert into products values (?1, ?2, ?3, ?4, ?5)",
            params![
                id,
                format!("product {id}"),
                format!("A fine product, number {id}, with a long description to truncate"),
                (100 + rng.next(99_900)) as f64 / 100.0,
                rng.next(5000) as f64 / 100.0
            ],
        )
        .map_err(sql("inserting a row"))?;
    }
    for id in 1..=ORDERS {
        tx.execute(
            "insert into orders values (?1, ?2, ?3, ?4, ?5)",
            params![
                id,
                format!("2025-{:02}-{:02}", 1 + rng.next(12), 1 + rng.next(28)),
                1 + rng.next(CUSTOMERS),
                1 + rng.next(PRODUCTS),
                1 + rng.next(9)
            ],
        )
        .map_err(sql("inserting a row"))?;
    }
    tx.commit().map_err(sql("committing the rows"))?;
    for table in ["customers", "products", "orders"] {
        capture::enable(&mut conn, table, None)?;
    }
    Ok(())
}

/// What the writer did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Written {
    /// Rows inserted.
    pub inserts: u64,
    /// Rows updated.
    pub updates: u64,
    /// Rows deleted.
    pub deletes: u64,
}

/// Changes the database every 50 ms (an order placed, a customer's email changed, now and then
/// an order cancelled) until `duration` passed or `stop` is set.
pub fn run_writer(
    path: &Path,
    duration: Duration,
    seed: u64,
    stop: &AtomicBool,
) -> Result<Written, DemoError> {
    let conn = Connection::open(path).map_err(sql("opening the database"))?;
    conn.busy_timeout(Duration::from_secs(10))
        .map_err(sql("setting the busy timeout"))?;
    let mut rng = Lcg(seed);
    let mut written = Written::default();
    let start = Instant::now();
    while start.elapsed() < duration && !stop.load(Ordering::Relaxed) {
        let customer = 1 + rng.next(CUSTOMERS);
        conn.execute(
            "insert into orders (order_date, purchaser, product_id, quantity) values (date('now'), ?1, ?2, ?3)",
            params![customer, 1 + rng.next(PRODUCTS), 1 + rng.next(9)],
        )
        .map_err(sql("placing an order"))?;
        written.inserts += 1;
        let n = conn
            .execute(
                "update customers set email = 'moved' || ?2 || '@example.org', phone = '+1-555-' || ?2 where id = ?1",
                params![customer, rng.next(10_000)],
            )
            .map_err(sql("changing a customer"))?;
        written.updates += n as u64;
        if rng.next(4) == 0 {
            let n = conn
                .execute(
                    "delete from orders where id = (select min(id) from orders)",
                    [],
                )
                .map_err(sql("cancelling an order"))?;
            written.deletes += n as u64;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Ok(written)
}
