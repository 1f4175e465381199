//! Ledgers and team directories ski did not write, crafted with rusqlite the way someone with
//! write access to a teams root could: a trigger, a view, an index or a table beside ski's schema
//! is reported by `maintenance check` and refused by every other command before it reads or
//! writes a row (exit 3, `ledger_unusable`, the object named), and the ledger is left as it was;
//! a row with a status no enum names, a BLOB where text belongs or a task list that is not JSON is
//! reported by the check and refused by name by the commands that read it; a broken config.json
//! (garbage, a directory, a FIFO) is listed per team by `team list` while the others stay listed
//! (E-TEAM-27, E-TEAM-29).

use crate::teams_support;

use rstest::rstest;
use rusqlite::Connection;
use serde_json::Value;
use teams_support::{LEAD, Root};

/// A team `t` with three pending tasks, `2` waiting for `1`.
fn team_with_tasks() -> Root {
    let root = Root::new();
    root.ok(LEAD, &["team", "create", "t"]);
    for subject in ["one", "two", "three"] {
        root.ok(LEAD, &["task", "create", "t", "--subject", subject]);
    }
    root.ok(LEAD, &["task", "depend", "t", "2", "--on", "1"]);
    root
}

/// Runs `sql` on team `t`'s ledger with CHECK constraints off (as a crafted file would have them).
fn craft(root: &Root, sql: &str) {
    let conn = Connection::open(root.ledger("t")).expect("open the ledger");
    conn.execute_batch(&format!("PRAGMA ignore_check_constraints = ON; {sql}"))
        .expect("craft the ledger");
}

/// Every task row as (id, status, owner), read past ski.
fn task_rows(root: &Root) -> Vec<(String, String, Option<String>)> {
    let conn = Connection::open(root.ledger("t")).expect("open the ledger");
    let mut statement = conn
        .prepare("SELECT id, CAST(status AS TEXT), owner FROM tasks ORDER BY seq")
        .expect("query");
    statement
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
        .expect("rows")
        .collect::<Result<_, _>>()
        .expect("rows")
}

fn message(value: &Value) -> &str {
    value["error"]["message"].as_str().unwrap_or("")
}

/// `maintenance check` of team `t`: it always answers (exit 0) with what it found.
fn check(root: &Root) -> Value {
    let (code, value) = root.run(LEAD, &["maintenance", "check", "t"]);
    assert_eq!(code, 0, "maintenance check answers: {value}");
    value
}

#[test]
fn a_healthy_ledger_has_no_findings() {
    let root = team_with_tasks();
    let value = check(&root);
    assert_eq!(value["healthy"], true, "{value}");
    assert_eq!(value["foreignSchema"], serde_json::json!([]), "{value}");
    assert_eq!(value["foreignRows"], serde_json::json!([]), "{value}");
    assert_eq!(value["foreignRowsTruncated"], false, "{value}");
}

#[rstest]
#[case::trigger(
    "CREATE TRIGGER vanish AFTER UPDATE ON tasks BEGIN DELETE FROM tasks WHERE id = new.id; END;",
    "trigger",
    "vanish",
    "foreign"
)]
#[case::view(
    "CREATE VIEW open_tasks AS SELECT * FROM tasks;",
    "view",
    "open_tasks",
    "foreign"
)]
#[case::index(
    "CREATE UNIQUE INDEX one_subject ON tasks (subject);",
    "index",
    "one_subject",
    "foreign"
)]
#[case::table("CREATE TABLE notes (text TEXT);", "table", "notes", "foreign")]
#[case::dropped_index("DROP INDEX tasks_owner;", "index", "tasks_owner", "missing")]
fn a_schema_object_ski_did_not_create_is_reported_and_every_command_refuses_the_ledger(
    #[case] sql: &str,
    #[case] kind: &str,
    #[case] name: &str,
    #[case] problem: &str,
) {
    let root = team_with_tasks();
    craft(&root, sql);
    let before = task_rows(&root);
    let bytes_before = std::fs::read(root.ledger("t")).expect("ledger");

    for args in [
        &["task", "claim", "t", "1"][..],
        &["task", "complete", "t", "1"],
        &["task", "create", "t", "--subject", "four"],
        &["task", "list", "t"],
        &["team", "board", "t"],
        &["member", "list", "t"],
        &["maintenance", "cleanup", "t", "--older-than-ms", "0"],
    ] {
        let (code, value) = root.run(LEAD, args);
        assert_eq!(
            (code, value["error"]["code"].as_str()),
            (3, Some("ledger_unusable")),
            "{args:?}: {value}"
        );
        let said = message(&value);
        assert!(
            said.contains(&format!("{kind} \"{name}\"")) && said.contains("schema"),
            "{args:?} names the object: {said}"
        );
    }
    assert_eq!(task_rows(&root), before, "no row changed");
    assert_eq!(
        std::fs::read(root.ledger("t")).expect("ledger"),
        bytes_before,
        "the file is left as it was"
    );

    let value = check(&root);
    assert_eq!(value["healthy"], false, "{value}");
    let found = value["foreignSchema"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert!(
        found
            .iter()
            .any(|f| f["type"] == kind && f["name"] == name && f["problem"] == problem),
        "the check lists the {kind} {name}: {value}"
    );
}

#[test]
fn a_changed_table_definition_is_refused_like_a_foreign_object() {
    let root = team_with_tasks();
    craft(
        &root,
        "CREATE TABLE activity2 (seq INTEGER PRIMARY KEY AUTOINCREMENT, at INTEGER, actor TEXT, action TEXT, taskId TEXT, detail TEXT);
         INSERT INTO activity2 SELECT * FROM activity;
         DROP TABLE activity;
         ALTER TABLE activity2 RENAME TO activity;",
    );
    let (code, value) = root.run(LEAD, &["task", "claim", "t", "1"]);
    assert_eq!(
        (code, value["error"]["code"].as_str()),
        (3, Some("ledger_unusable")),
        "{value}"
    );
    assert!(
        message(&value).contains("table \"activity\" (changed)"),
        "{value}"
    );
    let value = check(&root);
    let found = value["foreignSchema"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert!(
        found
            .iter()
            .any(|f| f["name"] == "activity" && f["problem"] == "changed"),
        "{value}"
    );
}

#[rstest]
#[case::unknown_status(
    "UPDATE tasks SET status = 'bogus' WHERE id = '3'",
    "3",
    "status",
    "bogus"
)]
#[case::blob_subject(
    "UPDATE tasks SET subject = X'00FF' WHERE id = '3'",
    "3",
    "subject",
    "blob"
)]
#[case::real_time(
    "UPDATE tasks SET createdAt = 1.5 WHERE id = '3'",
    "3",
    "createdAt",
    "real"
)]
#[case::text_time(
    "UPDATE tasks SET createdAt = 'yesterday' WHERE id = '3'",
    "3",
    "createdAt",
    "text"
)]
fn a_task_row_ski_did_not_write_is_refused_by_name_and_reported(
    #[case] sql: &str,
    #[case] key: &str,
    #[case] column: &str,
    #[case] word: &str,
) {
    let root = team_with_tasks();
    craft(&root, sql);
    let before = task_rows(&root);

    for args in [
        &["task", "list", "t", "--include-completed"][..],
        &["team", "board", "t"],
        &["task", "show", "t", key],
        &["task", "claim", "t", key],
    ] {
        let (code, value) = root.run(LEAD, args);
        assert_eq!(
            (code, value["error"]["code"].as_str()),
            (3, Some("ledger_unusable")),
            "{args:?}: {value}"
        );
        let said = message(&value);
        assert!(
            said.contains(&format!("task \"{key}\"")) && said.contains(word),
            "{args:?} names the row and what it holds: {said}"
        );
    }
    assert_eq!(task_rows(&root), before, "no row changed");

    // A task whose row is ski's own is still claimed.
    let claimed = root.ok(LEAD, &["task", "claim", "t", "1"]);
    assert_eq!(claimed["task"]["status"], "in_progress", "{claimed}");

    let value = check(&root);
    assert_eq!(value["healthy"], false, "{value}");
    let rows = value["foreignRows"].as_array().cloned().unwrap_or_default();
    assert!(
        rows.iter().any(|r| r["table"] == "tasks"
            && r["key"] == key
            && r["column"] == column
            && r["problem"].as_str().unwrap_or("").contains(word)),
        "the check lists task {key}'s {column}: {value}"
    );
    assert_eq!(value["foreignSchema"], serde_json::json!([]), "{value}");
}

#[test]
fn member_rows_and_task_lists_ski_did_not_write_are_reported_and_refused() {
    let root = team_with_tasks();
    root.ok("agent:x:main", &["member", "join", "t", "x"]);
    craft(
        &root,
        "UPDATE members SET role = 'boss' WHERE sessionKey = 'agent:x:main';
         UPDATE tasks SET blockedBy = 'not json' WHERE id = '2';",
    );
    let (code, value) = root.run(LEAD, &["member", "list", "t"]);
    assert_eq!(
        (code, value["error"]["code"].as_str()),
        (3, Some("ledger_unusable")),
        "{value}"
    );
    assert!(
        message(&value).contains("member \"agent:x:main\"") && message(&value).contains("boss"),
        "{value}"
    );
    let (code, value) = root.run(LEAD, &["task", "list", "t", "--available"]);
    assert_eq!(
        (code, value["error"]["code"].as_str()),
        (3, Some("ledger_unusable")),
        "{value}"
    );
    assert!(message(&value).contains("not JSON"), "{value}");

    let value = check(&root);
    let rows = value["foreignRows"].as_array().cloned().unwrap_or_default();
    let listed: Vec<(String, String, String)> = rows
        .iter()
        .map(|r| {
            (
                r["table"].as_str().unwrap_or("").to_owned(),
                r["key"].as_str().unwrap_or("").to_owned(),
                r["column"].as_str().unwrap_or("").to_owned(),
            )
        })
        .collect();
    assert!(
        listed.contains(&("members".into(), "agent:x:main".into(), "role".into())),
        "{value}"
    );
    assert!(
        listed.contains(&("tasks".into(), "2".into(), "blockedBy".into())),
        "{value}"
    );
    assert_eq!(value["orphanedInboxes"], serde_json::json!([]), "{value}");
}

#[test]
fn the_check_lists_at_most_a_hundred_rows_and_says_there_were_more() {
    let root = team_with_tasks();
    let conn = Connection::open(root.ledger("t")).expect("open the ledger");
    conn.execute_batch(
        "PRAGMA ignore_check_constraints = ON;
         WITH RECURSIVE n(i) AS (SELECT 100 UNION ALL SELECT i + 1 FROM n WHERE i < 250)
         INSERT INTO tasks (id, seq, subject, description, status, createdAt)
         SELECT CAST(i AS TEXT), i, 's', 'd', 'bogus', 0 FROM n;",
    )
    .expect("craft");
    drop(conn);
    let value = check(&root);
    assert_eq!(
        value["foreignRows"].as_array().map(Vec::len),
        Some(100),
        "{value}"
    );
    assert_eq!(value["foreignRowsTruncated"], true, "{value}");
}

#[rstest]
#[case::garbage("garbage")]
#[case::directory("directory")]
#[case::fifo("fifo")]
fn a_broken_config_is_listed_per_team_and_the_others_stay_listed(#[case] how: &str) {
    let root = Root::new();
    root.ok(LEAD, &["team", "create", "a"]);
    root.ok(LEAD, &["team", "create", "b"]);
    let config = root.root.join("b").join("config.json");
    std::fs::remove_file(&config).expect("remove config");
    match how {
        "garbage" => std::fs::write(&config, b"{\"teamName\": \x00\xff").expect("garbage"),
        "directory" => std::fs::create_dir(&config).expect("directory"),
        _ => nix::unistd::mkfifo(&config, nix::sys::stat::Mode::S_IRWXU).expect("fifo"),
    }
    let (code, value) = root.run(LEAD, &["team", "list"]);
    assert_eq!(code, 3, "{value}");
    assert_eq!(value["error"]["code"], "team_unreadable", "{value}");
    assert_eq!(value["error"]["teams"], serde_json::json!(["b"]), "{value}");
    let teams = value["teams"].as_array().cloned().unwrap_or_default();
    assert_eq!(teams.len(), 2, "{value}");
    assert_eq!(teams[0]["name"], "a", "{value}");
    assert_eq!(teams[0]["status"], "active", "{value}");
    assert_eq!(teams[1]["name"], "b", "{value}");
    assert_eq!(teams[1]["error"]["code"], "team_unreadable", "{value}");
    // The readable team still works.
    root.ok(LEAD, &["task", "create", "a", "--subject", "s"]);
}
