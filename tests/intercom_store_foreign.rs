//! An intercom database holding what the server did not write, crafted with rusqlite in the
//! file a first run left: a trigger, a view or an unknown table is refused at startup with one
//! clear line naming it, before anything is written (a live session of the earlier run stays
//! as it was instead of being marked interrupted); a BLOB where text belongs is refused naming the
//! row; an approval with a status the server never writes is reported and the server starts
//! (E-INT-28).

use crate::intercom_support;

use std::path::{Path, PathBuf};

use intercom_support::{Server, fake_slack, read_db, run_to_exit, write_config};
use ski_mocks::slack::FakeSlack;

/// A config in `dir` whose database a first run created and left (then stopped); answers the
/// config and the database.
async fn database_of_a_first_run(dir: &Path, slack: &FakeSlack) -> (PathBuf, PathBuf) {
    let config = write_config(dir, slack, "");
    let server = Server::start(&config, &[]).await;
    let database = server.database();
    server.stop().await;
    let db = rusqlite::Connection::open(&database).expect("open the database");
    db.execute_batch(
        "INSERT INTO session (id, owner_user_id, status, created_at, updated_at)
         VALUES ('live-1', 'U1', 'active', 't', 't');",
    )
    .expect("a live session of the earlier run");
    (config, database)
}

fn craft(database: &Path, sql: &str) {
    let db = rusqlite::Connection::open(database).expect("open the database");
    db.execute_batch(&format!("PRAGMA ignore_check_constraints = ON; {sql}"))
        .expect("craft the database");
}

fn status_of(database: &Path, id: &str) -> String {
    read_db(database)
        .query_row("SELECT status FROM session WHERE id = ?1", [id], |row| {
            row.get(0)
        })
        .expect("the session row")
}

async fn assert_refused(sql: &str, named: &str) {
    let slack = fake_slack().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let (config, database) = database_of_a_first_run(dir.path(), &slack).await;
    craft(&database, sql);
    let (code, stderr) = run_to_exit(&config, &[], &[]).await;
    assert_eq!(code, Some(1), "a configuration failure: {stderr}");
    assert!(
        stderr.contains("holds what intercom did not write") && stderr.contains(named),
        "one clear line naming {named}: {stderr}"
    );
    assert_eq!(
        status_of(&database, "live-1"),
        "active",
        "nothing was written before the refusal"
    );
}

#[tokio::test]
async fn a_planted_trigger_is_refused_at_startup_before_anything_is_written() {
    assert_refused(
        "CREATE TRIGGER vanish AFTER UPDATE ON session BEGIN DELETE FROM session WHERE id = new.id; END;",
        "trigger \"vanish\"",
    )
    .await;
}

#[tokio::test]
async fn a_view_is_refused_at_startup() {
    assert_refused(
        "CREATE VIEW live AS SELECT * FROM session WHERE status = 'active';",
        "view \"live\"",
    )
    .await;
}

#[tokio::test]
async fn an_unknown_table_or_a_changed_index_is_refused_at_startup() {
    assert_refused("CREATE TABLE notes (text TEXT);", "table \"notes\"").await;
    assert_refused(
        "DROP INDEX idx_session_channel; CREATE UNIQUE INDEX idx_session_channel ON session(channel_id);",
        "index \"idx_session_channel\" (changed)",
    )
    .await;
}

#[tokio::test]
async fn a_blob_where_text_belongs_is_refused_naming_the_row() {
    assert_refused(
        "UPDATE session SET owner_user_id = X'00FF' WHERE id = 'live-1';",
        "session \"live-1\" column owner_user_id: a blob where ski writes text",
    )
    .await;
}

#[tokio::test]
async fn an_unknown_approval_status_is_reported_and_the_server_starts() {
    let slack = fake_slack().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let (config, database) = database_of_a_first_run(dir.path(), &slack).await;
    craft(
        &database,
        "INSERT INTO approval_request (session_id, request_id, title, diff_content, file_path, status, created_at)
         VALUES ('live-1', 'req-001', 't', '', 'a.txt', 'bogus', 't');",
    );
    let server = Server::start(&config, &[]).await;
    let line = server.wait_log("never writes").await;
    assert!(
        line.contains("approval_request")
            && line.contains("live-1/req-001")
            && line.contains("bogus"),
        "{line}"
    );
    assert_eq!(
        status_of(&database, "live-1"),
        "interrupted",
        "the earlier run's session was recovered as usual"
    );
    server.stop().await;
    let kept: String = read_db(&database)
        .query_row(
            "SELECT status FROM approval_request WHERE request_id = 'req-001'",
            [],
            |row| row.get(0),
        )
        .expect("the approval row");
    assert_eq!(kept, "bogus", "the row is left as it was");
}
