//! PostgreSQL for tests: `TOOLROUTER_TEST_POSTGRES_URL` names a server (see
//! scripts/postgres-for-tests.sh). Each test gets a fresh schema of its own (the store URL
//! sets `search_path` to it) in one shared test database, and the schema is dropped when the
//! guard is dropped (also when the test fails), so tests run in parallel and never see each
//! other's rows or migrations. Without the variable, PostgreSQL tests print the skip line
//! and pass.

use std::sync::atomic::{AtomicUsize, Ordering};

use sqlx::Connection;
use sqlx::postgres::PgConnection;

pub const URL_VAR: &str = "TOOLROUTER_TEST_POSTGRES_URL";

/// The shared database the tests' schemas live in. Its default collation is ICU `en-US`
/// when the server has ICU, so anything relying on the database's locale for byte order
/// shows up.
const TEST_DATABASE: &str = "toolrouter_test";

/// The server's URL, or `None` after printing the skip line.
pub fn server_url() -> Option<String> {
    match std::env::var(URL_VAR) {
        Ok(url) if !url.trim().is_empty() => Some(url),
        _ => {
            println!("PostgreSQL leg skipped: {URL_VAR} not set");
            None
        }
    }
}

/// The schema of one test; `url` is a store URL that uses it.
pub struct TestDb {
    pub url: String,
    pub schema: String,
    database_url: String,
}

static SEQ: AtomicUsize = AtomicUsize::new(0);

impl TestDb {
    /// A fresh schema, or `None` (skip line printed) without a server.
    pub async fn create() -> Option<TestDb> {
        let server = server_url()?;
        let database_url = with_database(&server, TEST_DATABASE);
        let mut conn = match PgConnection::connect(&database_url).await {
            Ok(conn) => conn,
            Err(_) => {
                create_test_database(&server).await;
                PgConnection::connect(&database_url).await.unwrap_or_else(|e| panic!("connecting to the test database: {e}"))
            }
        };
        let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() % 1_000_000_000;
        let schema = format!("t_{}_{}_{nanos}", std::process::id(), SEQ.fetch_add(1, Ordering::SeqCst));
        sqlx::raw_sql(sqlx::AssertSqlSafe(format!("CREATE SCHEMA \"{schema}\""))).execute(&mut conn).await.expect("CREATE SCHEMA");
        let _ = conn.close().await;
        let sep = if database_url.contains('?') { '&' } else { '?' };
        let url = format!("{database_url}{sep}options[search_path]={schema}");
        Some(TestDb { url, schema, database_url })
    }

    /// A plain connection to this schema, for checks the store does not offer.
    pub async fn connect(&self) -> PgConnection {
        PgConnection::connect(&self.url).await.expect("connect to the test schema")
    }
}

/// Creates the shared test database (ICU `en-US` collation if the server can). Tests
/// racing to create it: the losers' errors are ignored, the connection that follows tells.
async fn create_test_database(server: &str) {
    let mut admin = PgConnection::connect(server).await.unwrap_or_else(|e| panic!("connecting to {URL_VAR}: {e}"));
    let icu = format!("CREATE DATABASE {TEST_DATABASE} TEMPLATE template0 LOCALE_PROVIDER icu ICU_LOCALE 'en-US'");
    if sqlx::raw_sql(sqlx::AssertSqlSafe(icu)).execute(&mut admin).await.is_err() {
        let _ = sqlx::raw_sql(sqlx::AssertSqlSafe(format!("CREATE DATABASE {TEST_DATABASE}"))).execute(&mut admin).await;
    }
    let _ = admin.close().await;
}

impl Drop for TestDb {
    fn drop(&mut self) {
        let (database_url, schema) = (self.database_url.clone(), self.schema.clone());
        // No async drop: a thread with its own runtime, joined so the schema is gone when
        // the test ends (unless a connection the test leaked still holds a lock on it).
        let dropped = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
            rt.block_on(async move {
                let mut conn = PgConnection::connect(&database_url).await?;
                let sql = format!("SET lock_timeout = '5s'; DROP SCHEMA IF EXISTS \"{schema}\" CASCADE");
                sqlx::raw_sql(sqlx::AssertSqlSafe(sql)).execute(&mut conn).await?;
                conn.close().await
            })
        })
        .join();
        if !matches!(dropped, Ok(Ok(()))) {
            eprintln!("could not drop test schema {}: {dropped:?}", self.schema);
        }
    }
}

/// `url` with its database (path) replaced by `name`, query parameters kept.
pub fn with_database(url: &str, name: &str) -> String {
    let scheme_end = url.find("://").map_or(0, |i| i + 3);
    let query = url[scheme_end..].find('?').map_or(url.len(), |i| scheme_end + i);
    let path = url[scheme_end..query].find('/').map_or(query, |i| scheme_end + i);
    format!("{}/{name}{}", &url[..path], &url[query..])
}
