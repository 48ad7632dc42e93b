//! One behaviour suite for every store backend (SPEC §10): each case is an async function
//! taking a `Store`, run against SQLite (a temporary file) always, and against PostgreSQL
//! when `TOOLROUTER_TEST_POSTGRES_URL` names a server (a fresh database per case; see
//! scripts/postgres-for-tests.sh). Without the variable the `postgres::` cases print
//! "PostgreSQL leg skipped: TOOLROUTER_TEST_POSTGRES_URL not set" and pass.

mod common;

use std::collections::BTreeSet;

use common::pg;
use toolrouter::store::{CallKey, Claim, ClaimRequest, ConsentRow, DeferredRow, Lease, OAuthClientRow, Store, StoreError, TokenRow, Transition};

const T: &str = "tenant-1";
const OTHER: &str = "tenant-2";

// ----- the two legs -----

/// A SQLite store in a temporary file, removed when dropped.
struct SqliteFile {
    dir: std::path::PathBuf,
}

impl Drop for SqliteFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

async fn sqlite_store() -> (Store, SqliteFile) {
    static SEQ: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = SEQ.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    let dir = std::env::temp_dir().join(format!("toolrouter-store-suite-{}-{n}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let store = Store::open(&format!("sqlite://{}", dir.join("store.db").display())).await.expect("open SQLite");
    assert_eq!(store.backend_name(), "sqlite");
    (store, SqliteFile { dir })
}

/// Every case, once per backend: `sqlite::<case>` and `postgres::<case>`.
macro_rules! suite {
    ($($case:ident),* $(,)?) => {
        mod sqlite {
            $(
                #[tokio::test]
                async fn $case() {
                    let (store, _file) = super::sqlite_store().await;
                    super::$case(store).await;
                }
            )*
        }
        mod postgres {
            $(
                #[tokio::test]
                async fn $case() {
                    let Some(db) = super::pg::TestDb::create().await else { return };
                    let store = toolrouter::store::Store::open(&db.url).await.expect("open PostgreSQL");
                    assert_eq!(store.backend_name(), "postgres");
                    super::$case(store).await;
                }
            )*
        }
    };
}

suite!(
    ping_answers,
    create_version_numbers_versions_and_the_first_is_default,
    identical_definition_returns_the_latest_version,
    make_default_on_create_moves_the_pointer,
    get_version_of_unknown_agent_or_version_is_none,
    list_agents_pages_in_byte_order,
    list_versions_pages_and_unknown_agent_is_none,
    set_default_moves_the_pointer_and_refuses_unknown_versions,
    delete_agent_removes_versions_runs_and_usage,
    tenants_do_not_see_each_other,
    concurrent_creates_number_versions_without_gaps,
    pin_run_keeps_the_first_version_until_the_run_expires,
    concurrent_first_calls_of_a_run_pin_one_version,
    end_run_and_expire_runs_forget_runs,
    claim_call_new_then_running_then_done,
    finish_call_stores_the_first_outcome_only,
    release_call_lets_the_call_run_again,
    concurrent_claims_have_one_winner,
    concurrent_claims_and_outcomes_of_many_calls_each_keep_one_winner_and_the_first_outcome,
    deferred_insert_get_transition_complete,
    concurrent_transitions_have_one_winner,
    hand_to_client_stores_the_new_record_once_and_keeps_it_pending,
    list_deferred_filters_and_pages_with_the_cursor,
    count_pending_counts_every_tenant,
    usage_decays_and_orders_highest_first,
    concurrent_record_use_counts_every_call,
    live_runs_counts_a_tenants_runs_across_agents_until_they_end_or_expire,
    a_run_freezes_its_hot_tools_once_and_an_expired_run_forgets_them,
    a_claims_lease_is_renewed_by_its_owner_only_and_expire_call_waits_for_it_to_run_out,
    the_owner_giving_up_a_claim_writes_its_outcome_whatever_the_lease,
    an_executing_record_is_held_under_a_lease_and_completed_for_a_lost_holder_only_once_it_ran_out,
    pending_records_past_their_expiry_become_expired_and_cannot_be_moved,
    purge_deletes_old_records_in_batches_and_keeps_recent_pending_and_executing_ones,
    tokens_are_put_read_and_replaced_only_while_their_updated_time_is_unchanged,
    concurrent_token_replacements_with_one_expectation_have_one_winner,
    delete_tokens_removes_one_source_or_every_source_of_one_user,
    another_tenant_sees_no_oauth_rows_and_cannot_replace_or_delete_them,
    a_consent_is_taken_once_with_its_tenant,
    concurrent_takes_of_a_consent_have_one_winner,
    an_expired_consent_is_still_taken_and_purge_oauth_deletes_expired_consents_in_batches,
    the_first_registration_of_an_oauth_client_wins,
    purge_oauth_deletes_tokens_last_written_before_the_cut_off_in_batches,
    embeddings_round_trip_with_exact_bits_in_the_order_asked_and_absent_hashes_as_none,
    the_first_writer_of_an_embedding_wins,
    the_same_text_hash_under_another_model_is_a_separate_embedding,
    purge_embeddings_deletes_only_rows_unused_since_the_cut_off_and_at_most_the_limit,
    reading_an_embedding_unused_for_a_day_touches_it_so_it_survives_a_purge,
    a_large_batch_of_embeddings_round_trips_across_chunks,
    concurrent_puts_of_overlapping_embeddings_in_different_orders_all_succeed,
);

// ----- backend-independent -----

#[tokio::test]
async fn unsupported_store_url_is_refused_without_its_password() {
    let err = Store::open("mysql://admin:hunter2@db/x").await.unwrap_err();
    assert!(matches!(err, StoreError::BadUrl(_)), "{err:?}");
    let text = err.to_string();
    assert!(text.contains("postgres://") && text.contains("sqlite://"), "{text}");
    assert!(!text.contains("hunter2"), "{text}");
}

#[tokio::test]
async fn unreachable_postgres_server_is_a_clear_error_at_open() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    drop(listener);
    let started = std::time::Instant::now();
    let err = Store::open(&format!("postgres://toolrouter:hunter2@127.0.0.1:{port}/toolrouter")).await.unwrap_err();
    assert!(started.elapsed() < std::time::Duration::from_secs(5), "took {:?}", started.elapsed());
    let text = err.to_string();
    assert!(matches!(err, StoreError::Unreachable { .. }), "{err:?}");
    assert!(text.contains(&format!("127.0.0.1:{port}/toolrouter")), "{text}");
    assert!(text.to_lowercase().contains("refused"), "{text}");
    assert!(!text.contains("hunter2"), "{text}");
}

#[test]
fn store_urls_are_redacted_for_logs() {
    use toolrouter::store::redact_url;
    assert_eq!(redact_url("postgres://u:secret@h:5432/db"), "postgres://u:***@h:5432/db");
    assert_eq!(redact_url("postgres://u@h/db?sslmode=disable&password=secret"), "postgres://u@h/db?sslmode=disable&password=***");
    assert_eq!(redact_url("sqlite://toolrouter.db"), "sqlite://toolrouter.db");
    assert_eq!(pg::with_database("postgres://u:p@h:1/db?x=1", "t"), "postgres://u:p@h:1/t?x=1");
    assert_eq!(pg::with_database("postgres://u:p@h:1", "t"), "postgres://u:p@h:1/t");
}

/// Replicas starting at once against a fresh database: every one opens, and each migration
/// is applied (and recorded) exactly once.
#[tokio::test]
async fn postgres_migrations_run_once_when_replicas_start_together() {
    let Some(db) = pg::TestDb::create().await else { return };
    let opens = (0..6).map(|_| Store::open(&db.url));
    let stores: Vec<Store> = futures::future::join_all(opens).await.into_iter().map(|r| r.expect("open")).collect();
    let again = Store::open(&db.url).await.expect("reopen");
    let mut conn = db.connect().await;
    let rows: Vec<(i64,)> = sqlx::query_as("SELECT version FROM schema_migrations ORDER BY version").fetch_all(&mut conn).await.unwrap();
    assert_eq!(rows, vec![(1,), (2,), (3,), (4,)], "one row per migration");
    // Every replica works on the same tables.
    stores[0].create_version(T, "a", "{}", false, 1).await.unwrap();
    assert_eq!(stores[5].default_version(T, "a").await.unwrap(), Some(1));
    assert_eq!(again.default_version(T, "a").await.unwrap(), Some(1));
}

/// A database of the previous build (migrations 1 to 3 applied and recorded) gains the
/// embeddings table at the next start and keeps its rows.
#[tokio::test]
async fn postgres_database_at_migration_3_gains_the_embeddings_table() {
    let Some(db) = pg::TestDb::create().await else { return };
    let schema = include_str!("../src/store/schema_postgres.sql");
    let first_three = &schema[..schema.find("\n-- migration 4:").expect("migration 4 is in the schema")];
    {
        let mut conn = db.connect().await;
        sqlx::raw_sql(sqlx::AssertSqlSafe(first_three)).execute(&mut conn).await.expect("migrations 1 to 3");
        sqlx::raw_sql(
            "CREATE TABLE schema_migrations (version BIGINT PRIMARY KEY, applied_at BIGINT NOT NULL); \
             INSERT INTO schema_migrations VALUES (1, 0), (2, 0), (3, 0); \
             INSERT INTO oauth_clients VALUES ('tenant-1', 'https://as', 'https://cb', 'client', '', 1)",
        )
        .execute(&mut conn)
        .await
        .expect("the previous build's records");
    }
    let s = Store::open(&db.url).await.expect("migrated");
    let mut conn = db.connect().await;
    let rows: Vec<(i64,)> = sqlx::query_as("SELECT version FROM schema_migrations ORDER BY version").fetch_all(&mut conn).await.unwrap();
    assert_eq!(rows, vec![(1,), (2,), (3,), (4,)]);
    s.put_embeddings("m", &[(hash(1), vec![1.5, -2.0])], 1).await.expect("the embeddings table exists");
    assert_eq!(s.get_embeddings("m", &[hash(1)], 1).await.unwrap(), vec![Some(vec![1.5, -2.0])]);
    assert_eq!(s.get_oauth_client(T, "https://as", "https://cb").await.unwrap().map(|c| c.client_id), Some("client".into()), "rows kept");
}

/// A stored blob whose length is not `4 * dims` reads as absent, is not touched, and the next
/// put of its hash replaces it; a well-formed row is never replaced. (SQLite: a unit test in
/// src/store/sqlite.rs.)
#[tokio::test]
async fn postgres_malformed_embedding_reads_as_absent_and_is_replaced_by_the_next_put() {
    let Some(db) = pg::TestDb::create().await else { return };
    let s = Store::open(&db.url).await.expect("open");
    let mut conn = db.connect().await;
    sqlx::query("INSERT INTO embeddings (model, text_hash, dims, vector, used_at) VALUES ('m', $1, 3, '\\x0000803f', 0)")
        .bind(hash(1))
        .execute(&mut conn)
        .await
        .expect("a malformed row");
    assert_eq!(s.get_embeddings("m", &[hash(1)], 10 * DAY).await.unwrap(), vec![None]);
    let (used_at,): (i64,) = sqlx::query_as("SELECT used_at FROM embeddings").fetch_one(&mut conn).await.unwrap();
    assert_eq!(used_at, 0, "an absent row is not touched");
    s.put_embeddings("m", &[(hash(1), vec![1.0, 2.0, 3.0])], 10 * DAY).await.unwrap();
    assert_eq!(s.get_embeddings("m", &[hash(1)], 10 * DAY).await.unwrap(), vec![Some(vec![1.0, 2.0, 3.0])]);
    s.put_embeddings("m", &[(hash(1), vec![4.0])], 10 * DAY).await.unwrap();
    assert_eq!(s.get_embeddings("m", &[hash(1)], 10 * DAY).await.unwrap(), vec![Some(vec![1.0, 2.0, 3.0])], "first wins");
}

// ----- helpers -----

fn def(n: u32) -> String {
    format!("{{\"definition\":{n}}}")
}

fn deferred(id: &str, agent: &str, run: &str, create_time: i64) -> DeferredRow {
    DeferredRow {
        deferred_id: id.into(),
        agent_id: agent.into(),
        version: 1,
        run_id: run.into(),
        state: "pending".into(),
        record: format!("{{\"id\":\"{id}\"}}"),
        resolution: None,
        result: None,
        create_time,
        resolve_time: None,
        lease_until: None,
        expire_time: None,
    }
}

/// Tool call `call` of run `run` of agent `a` of tenant T.
fn key(run: &str, call: &str) -> CallKey {
    CallKey::new(T, "a", run, call)
}

/// A claim by owner `me` at `now`, its lease running 100 ms.
fn claim(now: i64) -> ClaimRequest {
    ClaimRequest { fingerprint: "f".into(), owner: "me".into(), now, lease_until: now + 100 }
}

fn running(since: i64) -> Claim {
    Claim::Running { since, lease_until: since + 100, fingerprint: Some("f".into()) }
}

fn done(outcome: &str) -> Claim {
    Claim::Done { outcome: outcome.into(), fingerprint: Some("f".into()) }
}

fn lease(until: i64) -> Lease<'static> {
    Lease { owner: "me", until }
}

fn ids(rows: &[DeferredRow]) -> Vec<&str> {
    rows.iter().map(|r| r.deferred_id.as_str()).collect()
}

/// Tokens of `user` for `source`, last written at `updated`.
fn token(user: &str, source: &str, updated: i64) -> TokenRow {
    TokenRow {
        user_id: user.into(),
        source_id: source.into(),
        server_url: format!("https://{source}.example/mcp"),
        sealed: format!("sealed-{user}-{source}-{updated}"),
        expires_at: Some(updated + 3_600_000),
        updated,
    }
}

/// A consent of user `ada` for source `s1`, expiring at `expire_time`.
fn consent(state_hash: &str, expire_time: i64) -> ConsentRow {
    ConsentRow {
        state_hash: state_hash.into(),
        user_id: "ada".into(),
        agent_id: "a".into(),
        source_id: "s1".into(),
        deferred_id: "d1".into(),
        sealed: format!("sealed-{state_hash}"),
        create_time: expire_time - 600_000,
        expire_time,
    }
}

fn oauth_client(issuer: &str, redirect_uri: &str, client_id: &str) -> OAuthClientRow {
    OAuthClientRow {
        issuer: issuer.into(),
        redirect_uri: redirect_uri.into(),
        client_id: client_id.into(),
        sealed_secret: format!("sealed-secret-of-{client_id}"),
        create_time: 1000,
    }
}

const DAY: i64 = 86_400_000;

/// A text hash as the caller makes them: 64 hex digits.
fn hash(n: u64) -> String {
    format!("{n:064x}")
}

/// A vector of `dims` values made from `seed`.
fn vector(seed: u32, dims: u32) -> Vec<f32> {
    (0..dims).map(|i| (seed * 1000 + i) as f32 / 7.0).collect()
}

fn bits(v: &[Option<Vec<f32>>]) -> Vec<Option<Vec<u32>>> {
    v.iter().map(|o| o.as_ref().map(|v| v.iter().map(|x| x.to_bits()).collect())).collect()
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-9
}

// ----- cases -----

async fn ping_answers(s: Store) {
    s.ping().await.expect("ping");
}

async fn create_version_numbers_versions_and_the_first_is_default(s: Store) {
    let (v1, created) = s.create_version(T, "a", &def(1), false, 1000).await.unwrap();
    assert!(created);
    assert_eq!((v1.agent_id.as_str(), v1.version, v1.is_default, v1.definition.as_str(), v1.create_time), ("a", 1, true, def(1).as_str(), 1000));
    let (v2, created) = s.create_version(T, "a", &def(2), false, 2000).await.unwrap();
    assert!(created);
    assert_eq!((v2.version, v2.is_default, v2.create_time), (2, false, 2000));
    assert_eq!(s.default_version(T, "a").await.unwrap(), Some(1), "make_default=false keeps the default");
    assert_eq!(s.get_version(T, "a", None).await.unwrap(), Some(v1.clone()));
    assert_eq!(s.get_version(T, "a", Some(2)).await.unwrap(), Some(v2));
    assert_eq!(s.get_version(T, "a", Some(1)).await.unwrap(), Some(v1));
    let agents = s.list_agents(T, "", 10).await.unwrap();
    assert_eq!(agents.len(), 1);
    let a = &agents[0];
    assert_eq!((a.agent_id.as_str(), a.default_version, a.latest_version, a.create_time, a.update_time), ("a", 1, 2, 1000, 2000));
}

async fn identical_definition_returns_the_latest_version(s: Store) {
    s.create_version(T, "a", &def(1), false, 1000).await.unwrap();
    s.create_version(T, "a", &def(2), false, 2000).await.unwrap();
    let (same, created) = s.create_version(T, "a", &def(2), false, 3000).await.unwrap();
    assert!(!created);
    assert_eq!((same.version, same.is_default, same.create_time), (2, false, 2000), "the stored version, as it was");
    // Identical to an older version only: that is a new version.
    let (v3, created) = s.create_version(T, "a", &def(1), false, 4000).await.unwrap();
    assert!(created);
    assert_eq!(v3.version, 3);
    assert_eq!(s.list_agents(T, "", 10).await.unwrap()[0].latest_version, 3);
}

async fn make_default_on_create_moves_the_pointer(s: Store) {
    s.create_version(T, "a", &def(1), false, 1000).await.unwrap();
    let (v2, _) = s.create_version(T, "a", &def(2), true, 2000).await.unwrap();
    assert!(v2.is_default);
    assert_eq!(s.default_version(T, "a").await.unwrap(), Some(2));
    s.set_default(T, "a", 1, 2500).await.unwrap().expect("v1 exists");
    // Re-sending the latest definition with make_default promotes it without a new version.
    let (again, created) = s.create_version(T, "a", &def(2), true, 3000).await.unwrap();
    assert!(!created);
    assert_eq!((again.version, again.is_default), (2, true));
    assert_eq!(s.default_version(T, "a").await.unwrap(), Some(2));
    assert_eq!(s.list_agents(T, "", 10).await.unwrap()[0].update_time, 3000);
}

async fn get_version_of_unknown_agent_or_version_is_none(s: Store) {
    assert_eq!(s.get_version(T, "nobody", None).await.unwrap(), None);
    assert_eq!(s.get_version(T, "nobody", Some(1)).await.unwrap(), None);
    assert_eq!(s.default_version(T, "nobody").await.unwrap(), None);
    s.create_version(T, "a", &def(1), false, 1000).await.unwrap();
    assert_eq!(s.get_version(T, "a", Some(2)).await.unwrap(), None);
    assert_eq!(s.get_version(T, "a", Some(0)).await.unwrap(), None);
}

async fn list_agents_pages_in_byte_order(s: Store) {
    // Byte order differs from most locales' order ("B" < "a", "-" < "_").
    for (i, id) in ["b", "é", "a_b", "B", "ab", "a-c"].iter().enumerate() {
        s.create_version(T, id, &def(1), false, i as i64).await.unwrap();
    }
    let mut seen = Vec::new();
    let mut after = String::new();
    loop {
        let page = s.list_agents(T, &after, 2).await.unwrap();
        assert!(page.len() <= 2);
        let Some(last) = page.last() else { break };
        after = last.agent_id.clone();
        seen.extend(page.iter().map(|a| a.agent_id.clone()));
    }
    assert_eq!(seen, ["B", "a-c", "a_b", "ab", "b", "é"]);
    assert!(s.list_agents(T, "é", 10).await.unwrap().is_empty());
    assert_eq!(s.list_agents(T, "", 1).await.unwrap()[0].agent_id, "B");
}

async fn list_versions_pages_and_unknown_agent_is_none(s: Store) {
    for n in 1..=5 {
        s.create_version(T, "a", &def(n), n == 3, n as i64).await.unwrap();
    }
    let page = s.list_versions(T, "a", 0, 2).await.unwrap().unwrap();
    assert_eq!(page.iter().map(|v| (v.version, v.is_default)).collect::<Vec<_>>(), [(1, false), (2, false)]);
    let page = s.list_versions(T, "a", 2, 2).await.unwrap().unwrap();
    assert_eq!(page.iter().map(|v| (v.version, v.is_default)).collect::<Vec<_>>(), [(3, true), (4, false)]);
    let page = s.list_versions(T, "a", 4, 2).await.unwrap().unwrap();
    assert_eq!(page.iter().map(|v| (v.version, v.definition.clone())).collect::<Vec<_>>(), [(5, def(5))]);
    assert_eq!(s.list_versions(T, "a", 5, 2).await.unwrap(), Some(vec![]));
    assert_eq!(s.list_versions(T, "nobody", 0, 2).await.unwrap(), None);
}

async fn set_default_moves_the_pointer_and_refuses_unknown_versions(s: Store) {
    s.create_version(T, "a", &def(1), false, 1000).await.unwrap();
    s.create_version(T, "a", &def(2), false, 2000).await.unwrap();
    let rec = s.set_default(T, "a", 2, 3000).await.unwrap().expect("moved");
    assert_eq!((rec.version, rec.is_default, rec.definition.as_str(), rec.create_time), (2, true, def(2).as_str(), 2000));
    assert_eq!(s.default_version(T, "a").await.unwrap(), Some(2));
    assert_eq!(s.get_version(T, "a", None).await.unwrap().unwrap().version, 2);
    assert!(!s.get_version(T, "a", Some(1)).await.unwrap().unwrap().is_default);
    let a = &s.list_agents(T, "", 10).await.unwrap()[0];
    assert_eq!((a.default_version, a.update_time), (2, 3000));
    assert_eq!(s.set_default(T, "a", 9, 4000).await.unwrap(), None);
    assert_eq!(s.set_default(T, "nobody", 1, 4000).await.unwrap(), None);
    assert_eq!(s.default_version(T, "a").await.unwrap(), Some(2), "a refused move changes nothing");
}

async fn delete_agent_removes_versions_runs_and_usage(s: Store) {
    s.create_version(T, "a", &def(1), false, 1000).await.unwrap();
    s.create_version(T, "a", &def(2), false, 1000).await.unwrap();
    s.pin_run(T, "a", "r1", 1, 1000, 0).await.unwrap();
    s.record_use(T, "a", "ada", "crm__lookup", 1000, 1000).await.unwrap();
    s.create_version(T, "b", &def(1), false, 1000).await.unwrap();
    s.pin_run(T, "b", "r1", 1, 1000, 0).await.unwrap();

    assert!(s.delete_agent(T, "a").await.unwrap());
    assert_eq!(s.default_version(T, "a").await.unwrap(), None);
    assert_eq!(s.get_version(T, "a", Some(2)).await.unwrap(), None);
    assert_eq!(s.list_versions(T, "a", 0, 10).await.unwrap(), None);
    assert_eq!(s.run_version(T, "a", "r1", 0).await.unwrap(), None);
    assert!(s.usage(T, "a", "ada", 1000, 1000).await.unwrap().is_empty());
    assert!(!s.delete_agent(T, "a").await.unwrap(), "already gone");
    // Others are untouched; a new agent of the same name starts again at version 1.
    assert_eq!(s.run_version(T, "b", "r1", 0).await.unwrap(), Some(1));
    let (v, created) = s.create_version(T, "a", &def(2), false, 2000).await.unwrap();
    assert_eq!((v.version, v.is_default, created), (1, true, true));
}

async fn tenants_do_not_see_each_other(s: Store) {
    s.create_version(T, "a", &def(1), false, 1000).await.unwrap();
    s.pin_run(T, "a", "r1", 1, 1000, 0).await.unwrap();
    s.record_use(T, "a", "ada", "x", 1000, 1000).await.unwrap();
    s.insert_deferred(T, &deferred("d1", "a", "r1", 1000)).await.unwrap();
    assert_eq!(s.claim_call(&key("r1", "c1"), &claim(1000)).await.unwrap(), Claim::New);

    assert_eq!(s.default_version(OTHER, "a").await.unwrap(), None);
    assert_eq!(s.get_version(OTHER, "a", None).await.unwrap(), None);
    assert!(s.list_agents(OTHER, "", 10).await.unwrap().is_empty());
    assert_eq!(s.set_default(OTHER, "a", 1, 2000).await.unwrap(), None);
    assert!(!s.delete_agent(OTHER, "a").await.unwrap());
    assert_eq!(s.run_version(OTHER, "a", "r1", 0).await.unwrap(), None);
    assert!(s.usage(OTHER, "a", "ada", 1000, 1000).await.unwrap().is_empty());
    assert_eq!(s.get_deferred(OTHER, "d1").await.unwrap(), None);
    assert_eq!(s.transition_deferred(OTHER, "d1", "x", 2000, lease(3000)).await.unwrap(), Transition::Missing);
    assert!(s.list_deferred(OTHER, "a", None, None, (i64::MIN, ""), 10).await.unwrap().is_empty());
    assert_eq!(s.claim_call(&CallKey::new(OTHER, "a", "r1", "c1"), &claim(1000)).await.unwrap(), Claim::New, "another tenant's call");
    assert_eq!(s.live_runs(OTHER).await.unwrap(), 0);
    // The same names in the other tenant are independent.
    let (v, _) = s.create_version(OTHER, "a", &def(9), false, 3000).await.unwrap();
    assert_eq!(v.version, 1);
    assert_eq!(s.get_version(T, "a", None).await.unwrap().unwrap().definition, def(1));
}

async fn concurrent_creates_number_versions_without_gaps(s: Store) {
    let creates = (1..=8).map(|n| {
        let s = s.clone();
        tokio::spawn(async move { s.create_version(T, "busy", &def(n), false, n as i64).await })
    });
    let mut versions: Vec<u32> = Vec::new();
    for r in futures::future::join_all(creates).await {
        let (v, created) = r.unwrap().expect("create");
        assert!(created);
        versions.push(v.version);
    }
    versions.sort();
    assert_eq!(versions, (1..=8).collect::<Vec<_>>());
    let agent = &s.list_agents(T, "", 10).await.unwrap()[0];
    assert_eq!((agent.latest_version, agent.default_version), (8, 1), "the first version created is the default");
    assert!(s.get_version(T, "busy", Some(1)).await.unwrap().unwrap().is_default);
}

async fn pin_run_keeps_the_first_version_until_the_run_expires(s: Store) {
    assert_eq!(s.pin_run(T, "a", "r1", 1, 1000, 0).await.unwrap(), 1);
    assert_eq!(s.pin_run(T, "a", "r1", 2, 2000, 0).await.unwrap(), 1, "a live run keeps its version");
    assert_eq!(s.run_version(T, "a", "r1", 2000).await.unwrap(), Some(1), "last seen at 2000");
    assert_eq!(s.run_version(T, "a", "r1", 2001).await.unwrap(), None, "idle since before 2001");
    // Idle since before `expired_before`: the next call pins anew.
    assert_eq!(s.pin_run(T, "a", "r1", 2, 5000, 3000).await.unwrap(), 2);
    assert_eq!(s.run_version(T, "a", "r1", 4000).await.unwrap(), Some(2));
    assert_eq!(s.pin_run(T, "a", "r2", 3, 5000, 3000).await.unwrap(), 3, "runs are independent");
    assert_eq!(s.pin_run(T, "b", "r1", 4, 5000, 3000).await.unwrap(), 4, "run ids are per agent");
    assert_eq!(s.run_version(T, "a", "nobody", 0).await.unwrap(), None);
}

async fn concurrent_first_calls_of_a_run_pin_one_version(s: Store) {
    let pins = (1..=8u32).map(|v| {
        let s = s.clone();
        tokio::spawn(async move { s.pin_run(T, "a", "r1", v, 1000, 0).await })
    });
    let pinned: BTreeSet<u32> = futures::future::join_all(pins).await.into_iter().map(|r| r.unwrap().expect("pin")).collect();
    assert_eq!(pinned.len(), 1, "every first call sees the same version: {pinned:?}");
    assert_eq!(s.run_version(T, "a", "r1", 0).await.unwrap(), pinned.first().copied());
}

async fn end_run_and_expire_runs_forget_runs(s: Store) {
    s.pin_run(T, "a", "r1", 1, 1000, 0).await.unwrap();
    assert!(s.end_run(T, "a", "r1").await.unwrap());
    assert!(!s.end_run(T, "a", "r1").await.unwrap(), "already ended");
    assert_eq!(s.run_version(T, "a", "r1", 0).await.unwrap(), None);
    assert_eq!(s.pin_run(T, "a", "r1", 2, 1100, 0).await.unwrap(), 2, "an ended run pins again");

    s.pin_run(T, "a", "old", 1, 1000, 0).await.unwrap();
    s.pin_run(OTHER, "a", "old", 1, 1000, 0).await.unwrap();
    s.pin_run(T, "a", "new", 1, 5000, 0).await.unwrap();
    assert_eq!(s.expire_runs(2000, 2).await.unwrap(), 2, "a batch of at most two");
    assert_eq!(s.expire_runs(2000, 2).await.unwrap(), 1, "r1 (1100) and both `old` runs (1000), every tenant");
    assert_eq!(s.run_version(T, "a", "old", 0).await.unwrap(), None);
    assert_eq!(s.run_version(T, "a", "new", 0).await.unwrap(), Some(1));
    assert_eq!(s.expire_runs(2000, 10).await.unwrap(), 0);
    assert_eq!((s.live_runs(T).await.unwrap(), s.live_runs(OTHER).await.unwrap()), (1, 0), "the counters follow");
}

async fn live_runs_counts_a_tenants_runs_across_agents_until_they_end_or_expire(s: Store) {
    s.pin_run(T, "a", "r1", 1, 1000, 0).await.unwrap();
    s.pin_run(T, "a", "r2", 1, 3000, 0).await.unwrap();
    s.pin_run(T, "b", "r1", 1, 3000, 0).await.unwrap();
    s.pin_run(OTHER, "a", "r9", 1, 3000, 0).await.unwrap();
    s.pin_run(T, "a", "r1", 1, 3500, 0).await.unwrap();
    assert_eq!(s.live_runs(T).await.unwrap(), 3, "every agent of the tenant, each run once");
    assert_eq!(s.live_runs(OTHER).await.unwrap(), 1);
    s.end_run(T, "a", "r2").await.unwrap();
    s.end_run(T, "a", "r2").await.unwrap();
    assert_eq!(s.live_runs(T).await.unwrap(), 2, "an ended run no longer counts, once");
    // An idle run counts until the sweeper forgets it; reviving it does not count it twice.
    assert_eq!(s.pin_run(T, "a", "r1", 2, 9000, 5000).await.unwrap(), 2, "revived after its expiry");
    assert_eq!(s.live_runs(T).await.unwrap(), 2);
    assert_eq!(s.expire_runs(4000, 10).await.unwrap(), 2, "b/r1 and the other tenant's r9, idle since 3000");
    assert_eq!((s.live_runs(T).await.unwrap(), s.live_runs(OTHER).await.unwrap()), (1, 0));
    assert!(!s.delete_agent(T, "a").await.unwrap(), "no definition was registered, but its runs go");
    assert_eq!(s.live_runs(T).await.unwrap(), 0, "deleting an agent forgets its runs");
    assert_eq!(s.live_runs("nobody").await.unwrap(), 0);
}

async fn a_run_freezes_its_hot_tools_once_and_an_expired_run_forgets_them(s: Store) {
    assert_eq!(s.freeze_run_hot(T, "a", "r1", "[\"x\"]").await.unwrap(), None, "no such run");
    s.pin_run(T, "a", "r1", 1, 1000, 0).await.unwrap();
    assert_eq!(s.run_hot(T, "a", "r1").await.unwrap(), None);
    assert_eq!(s.freeze_run_hot(T, "a", "r1", "[\"x\"]").await.unwrap().as_deref(), Some("[\"x\"]"));
    assert_eq!(s.freeze_run_hot(T, "a", "r1", "[\"y\"]").await.unwrap().as_deref(), Some("[\"x\"]"), "the first stays");
    s.pin_run(T, "a", "r1", 1, 2000, 0).await.unwrap();
    assert_eq!(s.run_hot(T, "a", "r1").await.unwrap().as_deref(), Some("[\"x\"]"), "a live run keeps them");
    s.pin_run(T, "a", "r1", 1, 9000, 5000).await.unwrap();
    assert_eq!(s.run_hot(T, "a", "r1").await.unwrap(), None, "a run pinned anew after its expiry starts over");
}

async fn a_claims_lease_is_renewed_by_its_owner_only_and_expire_call_waits_for_it_to_run_out(s: Store) {
    let k = key("r1", "c1");
    assert_eq!(s.claim_call(&k, &claim(1000)).await.unwrap(), Claim::New);
    assert_eq!(s.renew_calls("someone-else", std::slice::from_ref(&k), 9000).await.unwrap(), 0);
    assert_eq!(s.call_state(&k).await.unwrap(), Some(running(1000)));
    assert_eq!(s.renew_calls("me", &[k.clone(), key("r1", "unclaimed")], 2000).await.unwrap(), 1);
    assert!(matches!(s.call_state(&k).await.unwrap(), Some(Claim::Running { lease_until: 2000, .. })));
    assert!(!s.expire_call(&k, "lost", 1500, Some(1500)).await.unwrap(), "the lease runs until 2000");
    assert!(s.expire_call(&k, "lost", 2500, Some(2500)).await.unwrap());
    assert_eq!(s.call_state(&k).await.unwrap(), Some(done("lost")));
    assert_eq!(s.renew_calls("me", std::slice::from_ref(&k), 9000).await.unwrap(), 0, "a finished call has no lease");
    s.finish_call(&k, "late", 3000).await.unwrap();
    assert_eq!(s.call_state(&k).await.unwrap(), Some(done("lost")), "the first outcome stays");
}

async fn the_owner_giving_up_a_claim_writes_its_outcome_whatever_the_lease(s: Store) {
    let k = key("r1", "c1");
    s.claim_call(&k, &claim(1000)).await.unwrap();
    assert!(s.expire_call(&k, "cut off", 1010, None).await.unwrap());
    assert_eq!(s.call_state(&k).await.unwrap(), Some(done("cut off")));
    assert!(!s.expire_call(&k, "again", 1020, None).await.unwrap());
}

async fn an_executing_record_is_held_under_a_lease_and_completed_for_a_lost_holder_only_once_it_ran_out(s: Store) {
    s.insert_deferred(T, &deferred("d1", "a", "r1", 1000)).await.unwrap();
    assert_eq!(s.transition_deferred(T, "d1", "approve", 2000, lease(3000)).await.unwrap(), Transition::Moved);
    assert_eq!(s.get_deferred(T, "d1").await.unwrap().unwrap().lease_until, Some(3000));
    let ids = [(T.to_string(), "d1".to_string())];
    assert_eq!(s.renew_deferred("someone-else", &ids, 9000).await.unwrap(), 0);
    assert_eq!(s.renew_deferred("me", &ids, 4000).await.unwrap(), 1);
    assert!(!s.complete_deferred(T, "d1", "lost", 3500, Some(3500)).await.unwrap(), "still held until 4000");
    assert!(s.complete_deferred(T, "d1", "lost", 4500, Some(4500)).await.unwrap());
    let row = s.get_deferred(T, "d1").await.unwrap().unwrap();
    assert_eq!((row.state.as_str(), row.result.as_deref(), row.lease_until), ("resolved", Some("lost"), None));
    assert!(!s.complete_deferred(T, "d1", "late", 5000, None).await.unwrap(), "the first result stays");
}

async fn pending_records_past_their_expiry_become_expired_and_cannot_be_moved(s: Store) {
    s.insert_deferred(T, &DeferredRow { expire_time: Some(5000), ..deferred("d1", "a", "r1", 1000) }).await.unwrap();
    s.insert_deferred(T, &DeferredRow { expire_time: Some(9000), ..deferred("d2", "a", "r1", 1000) }).await.unwrap();
    s.insert_deferred(T, &deferred("d3", "a", "r1", 1000)).await.unwrap();
    assert!(matches!(s.transition_deferred(T, "d1", "approve", 6000, lease(9000)).await.unwrap(), Transition::Already(r) if r.state == "pending"));
    assert_eq!(s.expire_deferred(6000, 10).await.unwrap(), 1);
    let d1 = s.get_deferred(T, "d1").await.unwrap().unwrap();
    assert_eq!((d1.state.as_str(), d1.resolve_time, d1.expire_time), ("expired", Some(5000), Some(5000)));
    assert_eq!(s.expire_deferred(6000, 10).await.unwrap(), 0, "d2 expires at 9000, d3 never");
    assert_eq!(s.transition_deferred(T, "d2", "approve", 6000, lease(9000)).await.unwrap(), Transition::Moved);
    assert_eq!(s.count_pending().await.unwrap(), 1);
}

async fn purge_deletes_old_records_in_batches_and_keeps_recent_pending_and_executing_ones(s: Store) {
    for i in 0..5 {
        let k = key("r1", &format!("old{i}"));
        s.claim_call(&k, &claim(1000)).await.unwrap();
        s.finish_call(&k, "o", 1000 + i).await.unwrap();
    }
    s.claim_call(&key("r1", "recent"), &claim(9000)).await.unwrap();
    s.insert_deferred(T, &deferred("pending", "a", "r1", 1000)).await.unwrap();
    s.insert_deferred(T, &deferred("resolved", "a", "r1", 1000)).await.unwrap();
    s.transition_deferred(T, "resolved", "deny", 1500, lease(2000)).await.unwrap();
    s.complete_deferred(T, "resolved", "{}", 1600, None).await.unwrap();
    s.insert_deferred(T, &deferred("executing", "a", "r1", 1000)).await.unwrap();
    s.transition_deferred(T, "executing", "approve", 1500, lease(2000)).await.unwrap();

    let first = s.purge(5000, 3).await.unwrap();
    assert_eq!((first.calls, first.deferred), (3, 1), "a batch of at most three");
    let second = s.purge(5000, 3).await.unwrap();
    assert_eq!((second.calls, second.deferred), (2, 0));
    assert_eq!(s.purge(5000, 3).await.unwrap().total(), 0);
    assert_eq!(s.call_state(&key("r1", "old0")).await.unwrap(), None);
    assert!(s.call_state(&key("r1", "recent")).await.unwrap().is_some());
    assert!(s.get_deferred(T, "pending").await.unwrap().is_some(), "pending records wait for the host");
    assert!(s.get_deferred(T, "executing").await.unwrap().is_some());
    assert_eq!(s.get_deferred(T, "resolved").await.unwrap(), None);
}

async fn claim_call_new_then_running_then_done(s: Store) {
    let k = key("r1", "c1");
    assert_eq!(s.call_state(&k).await.unwrap(), None);
    assert_eq!(s.claim_call(&k, &claim(1000)).await.unwrap(), Claim::New);
    assert_eq!(s.claim_call(&k, &claim(1500)).await.unwrap(), running(1000));
    assert_eq!(s.call_state(&k).await.unwrap(), Some(running(1000)));
    s.finish_call(&k, "{\"outcome\":1}", 2000).await.unwrap();
    assert_eq!(s.claim_call(&k, &claim(3000)).await.unwrap(), done("{\"outcome\":1}"));
    assert_eq!(s.call_state(&k).await.unwrap(), Some(done("{\"outcome\":1}")));
    // The id is scoped to (agent, run).
    assert_eq!(s.claim_call(&key("r2", "c1"), &claim(3000)).await.unwrap(), Claim::New);
    assert_eq!(s.claim_call(&CallKey::new(T, "b", "r1", "c1"), &claim(3000)).await.unwrap(), Claim::New);
}

async fn finish_call_stores_the_first_outcome_only(s: Store) {
    let k = key("r1", "c1");
    assert_eq!(s.claim_call(&k, &claim(1000)).await.unwrap(), Claim::New);
    s.finish_call(&k, "first", 2000).await.unwrap();
    s.finish_call(&k, "second", 3000).await.unwrap();
    assert_eq!(s.call_state(&k).await.unwrap(), Some(done("first")));
    // A finished call cannot be released.
    s.release_call(&k).await.unwrap();
    assert_eq!(s.claim_call(&k, &claim(4000)).await.unwrap(), done("first"));
    // Finishing a call nobody claimed stores nothing.
    s.finish_call(&key("r1", "unclaimed"), "x", 5000).await.unwrap();
    assert_eq!(s.call_state(&key("r1", "unclaimed")).await.unwrap(), None);
}

async fn release_call_lets_the_call_run_again(s: Store) {
    let k = key("r1", "c1");
    assert_eq!(s.claim_call(&k, &claim(1000)).await.unwrap(), Claim::New);
    s.release_call(&k).await.unwrap();
    assert_eq!(s.call_state(&k).await.unwrap(), None);
    assert_eq!(s.claim_call(&k, &claim(2000)).await.unwrap(), Claim::New);
    assert_eq!(s.claim_call(&k, &claim(2500)).await.unwrap(), running(2000));
    s.release_call(&key("r1", "never-claimed")).await.unwrap();
}

async fn concurrent_claims_have_one_winner(s: Store) {
    for round in 0..3 {
        let k = key("r1", &format!("c{round}"));
        let claims = (0..10).map(|_| {
            let (s, k) = (s.clone(), k.clone());
            tokio::spawn(async move { s.claim_call(&k, &claim(1000)).await })
        });
        let claims: Vec<Claim> = futures::future::join_all(claims).await.into_iter().map(|r| r.unwrap().expect("claim")).collect();
        assert_eq!(claims.iter().filter(|c| **c == Claim::New).count(), 1, "{claims:?}");
        assert!(claims.iter().all(|c| *c == Claim::New || *c == running(1000)), "{claims:?}");
    }
}

/// Many calls at once (written in batches): per call id one claim wins, the first outcome
/// stays, and a claim after the outcome finds it.
async fn concurrent_claims_and_outcomes_of_many_calls_each_keep_one_winner_and_the_first_outcome(s: Store) {
    let attempts = (0..300).map(|i| {
        let s = s.clone();
        let id = format!("m{}", i % 100);
        tokio::spawn(async move {
            let k = key("batch", &id);
            let claimed = s.claim_call(&k, &claim(1000)).await.expect("claim");
            if claimed == Claim::New {
                s.finish_call(&k, &format!("outcome of {id}"), 2000).await.expect("finish");
                s.finish_call(&k, "a later outcome", 3000).await.expect("finish again");
            }
            (id, claimed)
        })
    });
    let results: Vec<(String, Claim)> = futures::future::join_all(attempts).await.into_iter().map(|r| r.unwrap()).collect();
    for n in 0..100 {
        let id = format!("m{n}");
        let claims: Vec<&Claim> = results.iter().filter(|(i, _)| *i == id).map(|(_, c)| c).collect();
        assert_eq!(claims.len(), 3);
        assert_eq!(claims.iter().filter(|c| ***c == Claim::New).count(), 1, "{id}: {claims:?}");
        let expected = done(&format!("outcome of {id}"));
        assert!(claims.iter().all(|c| **c == Claim::New || **c == running(1000) || **c == expected), "{id}: {claims:?}");
        assert_eq!(s.claim_call(&key("batch", &id), &claim(4000)).await.unwrap(), expected);
    }
}

async fn deferred_insert_get_transition_complete(s: Store) {
    let row = deferred("d1", "a", "r1", 1000);
    s.insert_deferred(T, &row).await.unwrap();
    assert_eq!(s.get_deferred(T, "d1").await.unwrap(), Some(row.clone()));
    assert_eq!(s.get_deferred(T, "nope").await.unwrap(), None);
    assert!(s.insert_deferred(T, &row).await.is_err(), "ids are unique");

    assert_eq!(s.transition_deferred(T, "d1", "approve", 2000, lease(3000)).await.unwrap(), Transition::Moved);
    let moved = DeferredRow {
        state: "executing".into(),
        resolution: Some("approve".into()),
        resolve_time: Some(2000),
        lease_until: Some(3000),
        ..row.clone()
    };
    assert_eq!(s.get_deferred(T, "d1").await.unwrap(), Some(moved.clone()));
    // Not pending any more: the row as it is, unchanged by the second attempt.
    assert_eq!(s.transition_deferred(T, "d1", "deny", 3000, lease(4000)).await.unwrap(), Transition::Already(moved));
    assert_eq!(s.transition_deferred(T, "nope", "deny", 3000, lease(4000)).await.unwrap(), Transition::Missing);

    s.complete_deferred(T, "d1", "{\"result\":true}", 4000, None).await.unwrap();
    let done = s.get_deferred(T, "d1").await.unwrap().unwrap();
    assert_eq!(
        (done.state.as_str(), done.resolution.as_deref(), done.result.as_deref(), done.resolve_time),
        ("resolved", Some("approve"), Some("{\"result\":true}"), Some(4000))
    );
    assert_eq!((done.record, done.version, done.create_time), (row.record, 1, 1000));
    assert!(matches!(s.transition_deferred(T, "d1", "approve", 5000, lease(6000)).await.unwrap(), Transition::Already(r) if r.state == "resolved"));
}

async fn concurrent_transitions_have_one_winner(s: Store) {
    s.insert_deferred(T, &deferred("d1", "a", "r1", 1000)).await.unwrap();
    let attempts = (0..8).map(|i| {
        let s = s.clone();
        tokio::spawn(async move { s.transition_deferred(T, "d1", &format!("resolution-{i}"), 2000, lease(3000)).await })
    });
    let results: Vec<Transition> = futures::future::join_all(attempts).await.into_iter().map(|r| r.unwrap().expect("transition")).collect();
    assert_eq!(results.iter().filter(|t| **t == Transition::Moved).count(), 1, "{results:?}");
    let winner = s.get_deferred(T, "d1").await.unwrap().unwrap().resolution;
    for t in &results {
        match t {
            Transition::Moved => {}
            Transition::Already(row) => assert_eq!(row.resolution, winner, "the losers see the winner's resolution"),
            Transition::Missing => panic!("a loser found no record: {results:?}"),
        }
    }
}

async fn list_deferred_filters_and_pages_with_the_cursor(s: Store) {
    // Two records share a create_time: the id breaks the tie.
    let rows = [
        deferred("d3", "a", "r1", 1000),
        deferred("d1", "a", "r2", 2000),
        deferred("d2", "a", "r1", 2000),
        deferred("d0", "a", "r1", 3000),
        deferred("d4", "a", "r2", 4000),
        deferred("x1", "b", "r1", 1500),
    ];
    for r in &rows {
        s.insert_deferred(T, r).await.unwrap();
    }
    s.insert_deferred(OTHER, &deferred("o1", "a", "r1", 1200)).await.unwrap();
    let all = |run, state| s.list_deferred(T, "a", run, state, (i64::MIN, ""), 100);
    assert_eq!(ids(&all(None, None).await.unwrap()), ["d3", "d1", "d2", "d0", "d4"]);

    // Pages of two, each after the last (create_time, id) seen.
    let mut seen = Vec::new();
    let mut after = (i64::MIN, String::new());
    loop {
        let page = s.list_deferred(T, "a", None, None, (after.0, &after.1), 2).await.unwrap();
        let Some(last) = page.last() else { break };
        after = (last.create_time, last.deferred_id.clone());
        seen.extend(page.iter().map(|r| r.deferred_id.clone()));
    }
    assert_eq!(seen, ["d3", "d1", "d2", "d0", "d4"]);
    assert_eq!(ids(&s.list_deferred(T, "a", None, None, (2000, "d1"), 10).await.unwrap()), ["d2", "d0", "d4"]);

    assert_eq!(ids(&all(Some("r2"), None).await.unwrap()), ["d1", "d4"]);
    // d2 executing, d0 resolved with a result.
    s.transition_deferred(T, "d2", "approve", 5000, lease(6000)).await.unwrap();
    s.transition_deferred(T, "d0", "deny", 5000, lease(6000)).await.unwrap();
    assert!(s.complete_deferred(T, "d0", "{}", 5001, None).await.unwrap());
    assert!(!s.complete_deferred(T, "d0", "{\"later\":1}", 5002, None).await.unwrap(), "the first result stays");
    assert!(!s.complete_deferred(T, "d3", "{}", 5002, None).await.unwrap(), "a pending record is not completed");
    assert_eq!(ids(&all(None, Some("pending")).await.unwrap()), ["d3", "d1", "d4"]);
    assert_eq!(ids(&all(None, Some("executing")).await.unwrap()), ["d2"]);
    assert_eq!(ids(&all(None, Some("resolved")).await.unwrap()), ["d0"]);
    assert_eq!(s.get_deferred(T, "d0").await.unwrap().unwrap().result.as_deref(), Some("{}"));
    assert_eq!(ids(&all(Some("r1"), Some("pending")).await.unwrap()), ["d3"]);
    assert_eq!(ids(&all(Some("r9"), None).await.unwrap()), Vec::<&str>::new());
    assert_eq!(ids(&s.list_deferred(T, "b", None, None, (i64::MIN, ""), 10).await.unwrap()), ["x1"]);
    assert_eq!(ids(&s.list_deferred(OTHER, "a", None, None, (i64::MIN, ""), 10).await.unwrap()), ["o1"]);
}

async fn hand_to_client_stores_the_new_record_once_and_keeps_it_pending(s: Store) {
    let row = deferred("d1", "a", "r1", 1000);
    s.insert_deferred(T, &row).await.unwrap();
    assert_eq!(s.hand_to_client(T, "d1", "{\"client\":1}", "approve").await.unwrap(), Transition::Moved);
    let handed = DeferredRow { record: "{\"client\":1}".into(), resolution: Some("approve".into()), ..row.clone() };
    assert_eq!(s.get_deferred(T, "d1").await.unwrap(), Some(handed.clone()));
    assert_eq!(s.count_pending().await.unwrap(), 1, "still waiting for the host");
    // Only once: the second attempt sees the row as it is.
    assert_eq!(s.hand_to_client(T, "d1", "{\"client\":2}", "approve").await.unwrap(), Transition::Already(handed));
    assert_eq!(s.hand_to_client(T, "nope", "{}", "approve").await.unwrap(), Transition::Missing);
    assert_eq!(s.hand_to_client(OTHER, "d1", "{}", "approve").await.unwrap(), Transition::Missing, "another tenant's record");
    // The client's result then resolves it as usual.
    assert_eq!(s.transition_deferred(T, "d1", "client", 2000, lease(3000)).await.unwrap(), Transition::Moved);
    assert!(s.complete_deferred(T, "d1", "{}", 2001, None).await.unwrap());
}

async fn count_pending_counts_every_tenant(s: Store) {
    assert_eq!(s.count_pending().await.unwrap(), 0);
    s.insert_deferred(T, &deferred("d1", "a", "r1", 1000)).await.unwrap();
    s.insert_deferred(T, &deferred("d2", "a", "r1", 1000)).await.unwrap();
    s.insert_deferred(OTHER, &deferred("d1", "a", "r1", 1000)).await.unwrap();
    assert_eq!(s.count_pending().await.unwrap(), 3);
    s.transition_deferred(T, "d1", "approve", 2000, lease(3000)).await.unwrap();
    assert_eq!(s.count_pending().await.unwrap(), 2);
    s.complete_deferred(T, "d1", "{}", 2001, None).await.unwrap();
    assert_eq!(s.count_pending().await.unwrap(), 2);
}

async fn usage_decays_and_orders_highest_first(s: Store) {
    const H: i64 = 1_000_000; // half-life, ms
    let t0 = 10_000_000;
    for _ in 0..3 {
        s.record_use(T, "a", "ada", "alpha", t0, H).await.unwrap();
    }
    s.record_use(T, "a", "ada", "beta", t0, H).await.unwrap();
    s.record_use(T, "a", "ada", "gamma", t0 + H, H).await.unwrap();
    s.record_use(T, "a", "ada", "gamma", t0 + H, H).await.unwrap();
    s.record_use(T, "a", "ada", "delta", t0 + H, H).await.unwrap();
    s.record_use(T, "a", "ada", "epsilon", t0 + H, H).await.unwrap();
    s.record_use(T, "a", "bob", "beta", t0, H).await.unwrap();

    let at_t0 = s.usage(T, "a", "ada", t0, H).await.unwrap();
    assert!(close(at_t0[0].1, 3.0) && at_t0[0].0 == "alpha", "{at_t0:?}");
    // One half-life later: alpha 3 → 1.5, beta 1 → 0.5; gamma 2, delta 1 and epsilon 1 are fresh
    // (equal counts by name).
    let usage = s.usage(T, "a", "ada", t0 + H, H).await.unwrap();
    let names: Vec<&str> = usage.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["gamma", "alpha", "delta", "epsilon", "beta"], "{usage:?}");
    let scores: Vec<f64> = usage.iter().map(|(_, s)| *s).collect();
    for (got, want) in scores.iter().zip([2.0, 1.5, 1.0, 1.0, 0.5]) {
        assert!(close(*got, want), "{usage:?}");
    }
    // A new call adds one to the decayed count.
    s.record_use(T, "a", "ada", "beta", t0 + 2 * H, H).await.unwrap();
    let usage = s.usage(T, "a", "ada", t0 + 2 * H, H).await.unwrap();
    let beta = usage.iter().find(|(n, _)| n == "beta").unwrap().1;
    assert!(close(beta, 1.25), "0.25 left of the first call, plus one: {usage:?}");
    assert_eq!(usage[0].0, "beta");
    // Per user.
    let bob = s.usage(T, "a", "bob", t0, H).await.unwrap();
    assert_eq!(bob.len(), 1);
    assert!(close(bob[0].1, 1.0));
    assert!(s.usage(T, "a", "nobody", t0, H).await.unwrap().is_empty());
}

async fn concurrent_record_use_counts_every_call(s: Store) {
    let uses = (0..20).map(|_| {
        let s = s.clone();
        tokio::spawn(async move { s.record_use(T, "a", "ada", "alpha", 1000, 1_000_000).await })
    });
    for r in futures::future::join_all(uses).await {
        r.unwrap().expect("record");
    }
    let usage = s.usage(T, "a", "ada", 1000, 1_000_000).await.unwrap();
    assert!(close(usage[0].1, 20.0), "every call counted: {usage:?}");
}

async fn tokens_are_put_read_and_replaced_only_while_their_updated_time_is_unchanged(s: Store) {
    assert_eq!(s.get_token(T, "ada", "s1").await.unwrap(), None);
    let first = token("ada", "s1", 1000);
    s.put_token(T, &first).await.unwrap();
    assert_eq!(s.get_token(T, "ada", "s1").await.unwrap(), Some(first.clone()));
    // A put replaces the row whole (a new consent), expiry included.
    let reconsented = TokenRow { expires_at: None, ..token("ada", "s1", 2000) };
    s.put_token(T, &reconsented).await.unwrap();
    assert_eq!(s.get_token(T, "ada", "s1").await.unwrap(), Some(reconsented.clone()));

    // A refresh that read the row at 2000 replaces it; one that read it at 1000 lost a race.
    let refreshed = token("ada", "s1", 3000);
    assert!(s.replace_token(T, &refreshed, 2000).await.unwrap());
    assert_eq!(s.get_token(T, "ada", "s1").await.unwrap(), Some(refreshed.clone()));
    assert!(!s.replace_token(T, &token("ada", "s1", 4000), 2000).await.unwrap(), "a stale expectation loses");
    assert!(!s.replace_token(T, &token("ada", "s1", 4000), 1000).await.unwrap());
    assert_eq!(s.get_token(T, "ada", "s1").await.unwrap(), Some(refreshed), "the loser changed nothing");
    // A refresh of tokens deleted meanwhile (the user disconnected) creates nothing.
    assert!(!s.replace_token(T, &token("ada", "s2", 4000), 3000).await.unwrap());
    assert_eq!(s.get_token(T, "ada", "s2").await.unwrap(), None);
    assert_eq!(s.get_token(T, "bob", "s1").await.unwrap(), None, "per user");
}

async fn concurrent_token_replacements_with_one_expectation_have_one_winner(s: Store) {
    s.put_token(T, &token("ada", "s1", 1000)).await.unwrap();
    let attempts = (0..8).map(|i| {
        let s = s.clone();
        tokio::spawn(async move { (i, s.replace_token(T, &token("ada", "s1", 2000 + i), 1000).await.expect("replace")) })
    });
    let results: Vec<(i64, bool)> = futures::future::join_all(attempts).await.into_iter().map(|r| r.unwrap()).collect();
    let winners: Vec<i64> = results.iter().filter(|(_, won)| *won).map(|(i, _)| *i).collect();
    assert_eq!(winners.len(), 1, "{results:?}");
    assert_eq!(s.get_token(T, "ada", "s1").await.unwrap(), Some(token("ada", "s1", 2000 + winners[0])), "the winner's row stays");
}

async fn delete_tokens_removes_one_source_or_every_source_of_one_user(s: Store) {
    for (user, source) in [("ada", "s1"), ("ada", "s2"), ("ada", "s3"), ("bob", "s1")] {
        s.put_token(T, &token(user, source, 1000)).await.unwrap();
    }
    assert_eq!(s.delete_tokens(T, "ada", Some("s1")).await.unwrap(), 1);
    assert_eq!(s.get_token(T, "ada", "s1").await.unwrap(), None);
    assert!(s.get_token(T, "ada", "s2").await.unwrap().is_some(), "only that source");
    assert_eq!(s.delete_tokens(T, "ada", Some("s1")).await.unwrap(), 0, "already gone");
    assert_eq!(s.delete_tokens(T, "ada", None).await.unwrap(), 2, "every source of the user");
    assert_eq!(s.get_token(T, "ada", "s2").await.unwrap(), None);
    assert_eq!(s.get_token(T, "ada", "s3").await.unwrap(), None);
    assert!(s.get_token(T, "bob", "s1").await.unwrap().is_some(), "another user's tokens stay");
    assert_eq!(s.delete_tokens(T, "nobody", None).await.unwrap(), 0);
}

async fn another_tenant_sees_no_oauth_rows_and_cannot_replace_or_delete_them(s: Store) {
    let row = token("ada", "s1", 1000);
    s.put_token(T, &row).await.unwrap();
    let client = oauth_client("https://as.example", "https://router.example/cb", "client-1");
    s.put_oauth_client(T, &client).await.unwrap();

    assert_eq!(s.get_token(OTHER, "ada", "s1").await.unwrap(), None);
    assert!(!s.replace_token(OTHER, &token("ada", "s1", 2000), 1000).await.unwrap());
    assert_eq!(s.delete_tokens(OTHER, "ada", Some("s1")).await.unwrap(), 0);
    assert_eq!(s.delete_tokens(OTHER, "ada", None).await.unwrap(), 0);
    assert_eq!(s.get_token(T, "ada", "s1").await.unwrap(), Some(row.clone()), "untouched");
    assert_eq!(s.get_oauth_client(OTHER, &client.issuer, &client.redirect_uri).await.unwrap(), None);

    // The same keys in the other tenant are rows of its own.
    let theirs = token("ada", "s1", 5000);
    s.put_token(OTHER, &theirs).await.unwrap();
    let their_client = oauth_client("https://as.example", "https://router.example/cb", "client-2");
    assert_eq!(s.put_oauth_client(OTHER, &their_client).await.unwrap(), their_client, "not the first tenant's registration");
    assert_eq!(s.get_token(T, "ada", "s1").await.unwrap(), Some(row));
    assert_eq!(s.get_token(OTHER, "ada", "s1").await.unwrap(), Some(theirs));
    assert_eq!(s.get_oauth_client(T, &client.issuer, &client.redirect_uri).await.unwrap(), Some(client));
    assert_eq!(s.delete_tokens(OTHER, "ada", None).await.unwrap(), 1);
    assert!(s.get_token(T, "ada", "s1").await.unwrap().is_some(), "deleting the other tenant's left this one's");
}

async fn a_consent_is_taken_once_with_its_tenant(s: Store) {
    let mine = consent("hash-1", 10_000);
    let theirs = ConsentRow { user_id: "eve".into(), ..consent("hash-2", 10_000) };
    s.insert_consent(T, &mine).await.unwrap();
    s.insert_consent(OTHER, &theirs).await.unwrap();
    assert!(s.insert_consent(T, &consent("hash-1", 20_000)).await.is_err(), "state hashes are unique");

    assert_eq!(s.take_consent("hash-1").await.unwrap(), Some((T.to_string(), mine)));
    assert_eq!(s.take_consent("hash-1").await.unwrap(), None, "single use");
    assert_eq!(s.take_consent("hash-2").await.unwrap(), Some((OTHER.to_string(), theirs)), "each consent names its own tenant");
    assert_eq!(s.take_consent("never-issued").await.unwrap(), None);
}

async fn concurrent_takes_of_a_consent_have_one_winner(s: Store) {
    for round in 0..3 {
        let hash = format!("hash-{round}");
        s.insert_consent(T, &consent(&hash, 10_000)).await.unwrap();
        let takes = (0..10).map(|_| {
            let (s, hash) = (s.clone(), hash.clone());
            tokio::spawn(async move { s.take_consent(&hash).await.expect("take") })
        });
        let taken: Vec<Option<(String, ConsentRow)>> = futures::future::join_all(takes).await.into_iter().map(|r| r.unwrap()).collect();
        let winners: Vec<&(String, ConsentRow)> = taken.iter().flatten().collect();
        assert_eq!(winners.len(), 1, "{taken:?}");
        assert_eq!(*winners[0], (T.to_string(), consent(&hash, 10_000)));
    }
}

async fn an_expired_consent_is_still_taken_and_purge_oauth_deletes_expired_consents_in_batches(s: Store) {
    // The store does not judge expiry when taking: the caller sees expire_time and refuses.
    s.insert_consent(T, &consent("expired", 1000)).await.unwrap();
    assert_eq!(s.take_consent("expired").await.unwrap(), Some((T.to_string(), consent("expired", 1000))));

    for i in 0..5 {
        s.insert_consent(T, &consent(&format!("old{i}"), 1000 + i)).await.unwrap();
    }
    s.insert_consent(OTHER, &consent("old-other-tenant", 1000)).await.unwrap();
    s.insert_consent(T, &consent("live", 9000)).await.unwrap();
    s.insert_consent(T, &consent("expiring-now", 5000)).await.unwrap();
    assert_eq!(s.purge_oauth(5000, 0, 4).await.unwrap(), (4, 0), "a batch of at most four, every tenant");
    assert_eq!(s.purge_oauth(5000, 0, 4).await.unwrap(), (2, 0));
    assert_eq!(s.purge_oauth(5000, 0, 4).await.unwrap(), (0, 0));
    assert_eq!(s.take_consent("old0").await.unwrap(), None);
    assert_eq!(s.take_consent("old-other-tenant").await.unwrap(), None);
    assert!(s.take_consent("live").await.unwrap().is_some(), "an unexpired consent stays");
    assert!(s.take_consent("expiring-now").await.unwrap().is_some(), "expiring at `now` is not yet before it");
}

async fn the_first_registration_of_an_oauth_client_wins(s: Store) {
    let (issuer, cb) = ("https://as.example", "https://router.example/cb");
    assert_eq!(s.get_oauth_client(T, issuer, cb).await.unwrap(), None);
    let first = oauth_client(issuer, cb, "first");
    assert_eq!(s.put_oauth_client(T, &first).await.unwrap(), first);
    let second = OAuthClientRow { create_time: 2000, ..oauth_client(issuer, cb, "second") };
    assert_eq!(s.put_oauth_client(T, &second).await.unwrap(), first, "the stored row, not the new one");
    assert_eq!(s.get_oauth_client(T, issuer, cb).await.unwrap(), Some(first.clone()));
    // Another redirect URI or issuer is another registration.
    let other_cb = oauth_client(issuer, "https://router.example/other", "third");
    assert_eq!(s.put_oauth_client(T, &other_cb).await.unwrap(), other_cb);
    let other_issuer = oauth_client("https://as2.example", cb, "fourth");
    assert_eq!(s.put_oauth_client(T, &other_issuer).await.unwrap(), other_issuer);
    assert_eq!(s.get_oauth_client(T, issuer, cb).await.unwrap(), Some(first));

    // Replicas registering at once all end up with one of them.
    let puts = (0..8).map(|i| {
        let s = s.clone();
        tokio::spawn(async move { s.put_oauth_client(T, &oauth_client("https://as3.example", cb, &format!("racer-{i}"))).await.expect("put") })
    });
    let stored: BTreeSet<String> = futures::future::join_all(puts).await.into_iter().map(|r| r.unwrap().client_id).collect();
    assert_eq!(stored.len(), 1, "{stored:?}");
    assert_eq!(s.get_oauth_client(T, "https://as3.example", cb).await.unwrap().unwrap().client_id, *stored.first().unwrap());
}

async fn purge_oauth_deletes_tokens_last_written_before_the_cut_off_in_batches(s: Store) {
    for i in 0..5 {
        s.put_token(T, &token("ada", &format!("old{i}"), 1000 + i)).await.unwrap();
    }
    s.put_token(OTHER, &token("ada", "old-other-tenant", 1000)).await.unwrap();
    s.put_token(T, &token("ada", "recent", 9000)).await.unwrap();
    s.put_token(T, &token("ada", "at-cut-off", 5000)).await.unwrap();
    // A refresh moves a token's clock: it is kept.
    s.put_token(T, &token("bob", "refreshed", 1000)).await.unwrap();
    assert!(s.replace_token(T, &token("bob", "refreshed", 6000), 1000).await.unwrap());
    s.insert_consent(T, &consent("live", 9000)).await.unwrap();

    assert_eq!(s.purge_oauth(1000, 5000, 4).await.unwrap(), (0, 4), "a batch of at most four, every tenant");
    assert_eq!(s.purge_oauth(1000, 5000, 4).await.unwrap(), (0, 2));
    assert_eq!(s.purge_oauth(1000, 5000, 4).await.unwrap(), (0, 0));
    assert_eq!(s.get_token(T, "ada", "old0").await.unwrap(), None);
    assert_eq!(s.get_token(OTHER, "ada", "old-other-tenant").await.unwrap(), None);
    assert!(s.get_token(T, "ada", "recent").await.unwrap().is_some());
    assert!(s.get_token(T, "ada", "at-cut-off").await.unwrap().is_some());
    assert!(s.get_token(T, "bob", "refreshed").await.unwrap().is_some());
    assert!(s.take_consent("live").await.unwrap().is_some(), "unexpired consents stay");
}

async fn embeddings_round_trip_with_exact_bits_in_the_order_asked_and_absent_hashes_as_none(s: Store) {
    assert_eq!(s.get_embeddings("m", &[], 0).await.unwrap(), Vec::<Option<Vec<f32>>>::new());
    s.put_embeddings("m", &[], 0).await.expect("nothing to write");
    // Values whose bits a lossy encoding would change: signed zero, NaN payloads, subnormals,
    // infinities, the extremes.
    let odd = vec![
        -0.0,
        0.0,
        f32::from_bits(0x7fc0_1234),
        f32::from_bits(0xffa0_0001),
        f32::from_bits(1),
        f32::MIN_POSITIVE,
        f32::INFINITY,
        f32::NEG_INFINITY,
        f32::MAX,
        f32::MIN,
        1.0 / 3.0,
    ];
    let rows = vec![(hash(1), odd.clone()), (hash(2), vector(2, 384)), (hash(3), vec![]), (hash(4), vector(4, 1))];
    s.put_embeddings("m", &rows, 1000).await.unwrap();
    let asked = vec![hash(4), hash(9), hash(1), hash(2), hash(8), hash(3), hash(1)];
    let got = s.get_embeddings("m", &asked, 1000).await.unwrap();
    let expected = vec![Some(vector(4, 1)), None, Some(odd.clone()), Some(vector(2, 384)), None, Some(vec![]), Some(odd)];
    assert_eq!(bits(&got), bits(&expected), "every bit, in the order asked, absent hashes as None, a hash asked twice twice");
}

async fn the_first_writer_of_an_embedding_wins(s: Store) {
    s.put_embeddings("m", &[(hash(1), vec![1.0, 2.0])], 1000).await.unwrap();
    // A second put of the hash (another replica, a restart) keeps the stored vector, even of
    // another length, and stores the hashes that are new.
    s.put_embeddings("m", &[(hash(1), vec![9.0, 9.0, 9.0]), (hash(2), vec![3.0])], 2000).await.unwrap();
    // A hash twice in one put: the first of them is stored.
    s.put_embeddings("m", &[(hash(3), vec![5.0]), (hash(3), vec![6.0])], 2000).await.unwrap();
    assert_eq!(
        s.get_embeddings("m", &[hash(1), hash(2), hash(3)], 2000).await.unwrap(),
        vec![Some(vec![1.0, 2.0]), Some(vec![3.0]), Some(vec![5.0])]
    );
    // Replicas putting at once: one vector stays, every put succeeds.
    let puts = (0..8).map(|i| {
        let s = s.clone();
        tokio::spawn(async move { s.put_embeddings("m", &[(hash(4), vec![i as f32])], 3000).await.expect("put") })
    });
    futures::future::join_all(puts).await.into_iter().for_each(|r| r.unwrap());
    let stored = s.get_embeddings("m", &[hash(4)], 3000).await.unwrap().remove(0).expect("stored");
    assert!(stored.len() == 1 && (0..8).any(|i| stored[0] == i as f32), "{stored:?}");
}

async fn the_same_text_hash_under_another_model_is_a_separate_embedding(s: Store) {
    s.put_embeddings("model-a", &[(hash(1), vec![1.0, 1.0])], 1000).await.unwrap();
    assert_eq!(s.get_embeddings("model-b", &[hash(1)], 1000).await.unwrap(), vec![None], "not another model's");
    s.put_embeddings("model-b", &[(hash(1), vec![2.0, 2.0, 2.0])], 1000).await.unwrap();
    assert_eq!(s.get_embeddings("model-a", &[hash(1)], 1000).await.unwrap(), vec![Some(vec![1.0, 1.0])]);
    assert_eq!(s.get_embeddings("model-b", &[hash(1)], 1000).await.unwrap(), vec![Some(vec![2.0, 2.0, 2.0])]);
    // Purging one model's old row leaves the other's.
    s.put_embeddings("model-c", &[(hash(1), vec![3.0])], 5000).await.unwrap();
    assert_eq!(s.purge_embeddings(2000, 10).await.unwrap(), 2);
    assert_eq!(s.get_embeddings("model-c", &[hash(1)], 5000).await.unwrap(), vec![Some(vec![3.0])]);
}

async fn purge_embeddings_deletes_only_rows_unused_since_the_cut_off_and_at_most_the_limit(s: Store) {
    let old: Vec<(String, Vec<f32>)> = (0..5).map(|i| (hash(i), vector(i as u32, 4))).collect();
    for (i, row) in old.iter().enumerate() {
        s.put_embeddings(if i % 2 == 0 { "m" } else { "other-model" }, std::slice::from_ref(row), 1000 + i as i64).await.unwrap();
    }
    s.put_embeddings("m", &[(hash(10), vec![1.0])], 5000).await.unwrap();
    s.put_embeddings("m", &[(hash(11), vec![2.0])], 9000).await.unwrap();
    assert_eq!(s.purge_embeddings(5000, 3).await.unwrap(), 3, "a batch of at most three, every model");
    assert_eq!(s.purge_embeddings(5000, 3).await.unwrap(), 2);
    assert_eq!(s.purge_embeddings(5000, 3).await.unwrap(), 0);
    let m: Vec<String> = (0..5).map(hash).collect();
    assert_eq!(s.get_embeddings("m", &m, 9000).await.unwrap(), vec![None; 5]);
    assert_eq!(s.get_embeddings("other-model", &m, 9000).await.unwrap(), vec![None; 5]);
    assert_eq!(
        s.get_embeddings("m", &[hash(10), hash(11)], 9000).await.unwrap(),
        vec![Some(vec![1.0]), Some(vec![2.0])],
        "used at the cut-off or after"
    );
}

async fn reading_an_embedding_unused_for_a_day_touches_it_so_it_survives_a_purge(s: Store) {
    s.put_embeddings("m", &[(hash(1), vec![1.0]), (hash(2), vec![2.0]), (hash(3), vec![3.0])], 0).await.unwrap();
    // Two days later a catalog reads 1 (unused for more than a day: touched) and an absent hash.
    let got = s.get_embeddings("m", &[hash(1), hash(9)], 2 * DAY).await.unwrap();
    assert_eq!(got, vec![Some(vec![1.0]), None]);
    assert_eq!(s.purge_embeddings(DAY, 10).await.unwrap(), 2, "2 and 3, unread, go");
    assert_eq!(s.get_embeddings("m", &[hash(1), hash(2), hash(3)], 2 * DAY).await.unwrap(), vec![Some(vec![1.0]), None, None]);
    // At most one write per row per day: a read less than a day (or exactly a day) after the
    // last touch leaves used_at alone, so a purge just after it deletes the row.
    s.get_embeddings("m", &[hash(1)], 3 * DAY).await.unwrap();
    assert_eq!(s.purge_embeddings(2 * DAY + 1, 10).await.unwrap(), 1, "used_at stayed at two days");
    assert_eq!(s.get_embeddings("m", &[hash(1)], 3 * DAY).await.unwrap(), vec![None]);
}

async fn a_large_batch_of_embeddings_round_trips_across_chunks(s: Store) {
    // More than two chunks of 500, written and read in one call each.
    let rows: Vec<(String, Vec<f32>)> = (0..1_200).map(|i| (hash(i), vector(i as u32, 16))).collect();
    s.put_embeddings("m", &rows, 0).await.unwrap();
    // Asked in another order, with absent hashes among them: the answer follows the question.
    let mut asked: Vec<String> = (0..1_300).rev().map(hash).collect();
    asked.rotate_left(450);
    let got = s.get_embeddings("m", &asked, 2 * DAY).await.unwrap();
    assert_eq!(got.len(), asked.len());
    for (h, v) in asked.iter().zip(&got) {
        let i = u64::from_str_radix(h, 16).unwrap();
        assert_eq!(v.as_ref(), (i < 1_200).then(|| vector(i as u32, 16)).as_ref(), "hash {i}");
    }
    // That read touched every row in every chunk: none is unused since before a day.
    assert_eq!(s.purge_embeddings(DAY, 10_000).await.unwrap(), 0);
    assert_eq!(s.purge_embeddings(2 * DAY + 1, 10_000).await.unwrap(), 1_200);
}

async fn concurrent_puts_of_overlapping_embeddings_in_different_orders_all_succeed(s: Store) {
    // Replicas embedding the same new catalog at once, each in its own order: none fails (no
    // deadlock between their chunks), every row is stored once.
    let puts = (0..4u64).map(|k| {
        let s = s.clone();
        tokio::spawn(async move {
            let mut rows: Vec<(String, Vec<f32>)> = (0..1_100).map(|i| (hash(i), vector(i as u32, 8))).collect();
            rows.rotate_left((k * 300) as usize);
            if k % 2 == 1 {
                rows.reverse();
            }
            s.put_embeddings("m", &rows, 0).await.expect("put")
        })
    });
    futures::future::join_all(puts).await.into_iter().for_each(|r| r.unwrap());
    let all: Vec<String> = (0..1_100).map(hash).collect();
    let got = s.get_embeddings("m", &all, 0).await.unwrap();
    assert!(got.iter().enumerate().all(|(i, v)| v.as_deref() == Some(&vector(i as u32, 8)[..])));
    assert_eq!(s.purge_embeddings(1, 10_000).await.unwrap(), 1_100);
}
