//! Property tests of the AOF/1 codecs: timestamps, task files and envelope validation hold for
//! generated inputs, not only for the fixtures.

use proptest::prelude::*;
use serde_json::{Value, json};
use ski::aof::envelope::Envelope;
use ski::aof::message::parse_input;
use ski::aof::store::NewTask;
use ski::aof::task::{Frontmatter, Task, TaskStatus};
use ski::aof::task_id::TaskId;
use ski::aof::timestamp::Timestamp;

fn task_with(title: String, body: String, metadata: Value) -> Task {
    let now = Timestamp::parse("2026-02-09T21:00:00.000Z").expect("valid");
    let new = NewTask::new(title.clone());
    Task {
        frontmatter: Frontmatter {
            schema_version: 1,
            id: TaskId::parse("TASK-2026-02-09-001").expect("valid"),
            project: new.project,
            title,
            status: TaskStatus::InProgress,
            priority: new.priority,
            routing: new.routing,
            lease: None,
            created_at: now,
            updated_at: now,
            last_transition_at: now,
            created_by: new.created_by,
            parent_id: None,
            depends_on: Vec::new(),
            content_hash: None,
            metadata: metadata
                .as_object()
                .map(|m| m.clone().into_iter().collect())
                .unwrap_or_default(),
            extra: Default::default(),
        },
        body: body.trim().to_owned(),
    }
}

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        "[ -~]{0,12}".prop_map(Value::String),
        Just(json!("aof")),
        Just(json!("TASK-2026-02-09-001")),
        Just(json!("2026-02-09T21:00:00.000Z")),
    ];
    leaf.prop_recursive(3, 24, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map(
                prop_oneof![
                    Just("protocol".to_owned()),
                    Just("version".to_owned()),
                    Just("type".to_owned()),
                    Just("taskId".to_owned()),
                    Just("payload".to_owned()),
                    Just("sentAt".to_owned()),
                    "[a-z]{1,6}",
                ],
                inner,
                0..6
            )
            .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

proptest! {
    #[test]
    fn timestamps_round_trip_at_millisecond_precision(ms in 0i64..4_102_444_800_000) {
        let ts = Timestamp::from_unix_ms(ms).expect("in range");
        let again = Timestamp::parse(&ts.to_iso()).expect("own output parses");
        prop_assert_eq!(again.unix_ms(), ms);
    }

    #[test]
    fn task_files_round_trip(
        title in "[^\u{0}-\u{8}\u{b}-\u{1f}]{1,40}",
        body in "(.|\n){0,200}",
        depth in 0u64..3,
    ) {
        let title = if title.trim().is_empty() { "t".to_owned() } else { title };
        let task = task_with(title, body, json!({ "delegationDepth": depth, "note": "a: b # c" }));
        let text = task.render().expect("renders");
        let again = Task::parse(&text).expect("rendered file parses");
        prop_assert_eq!(again, task);
    }

    #[test]
    fn work_log_entries_stay_one_line(notes in "(.|\n){1,80}", count in 1usize..5) {
        let mut task = task_with("t".into(), "# Task\n\n---\n\ntext".into(), json!({}));
        let now = Timestamp::parse("2026-02-09T21:00:00.000Z").expect("valid");
        for _ in 0..count {
            let line = ski::aof::task::work_log_line(now, None, Some(&notes), &[]);
            task.append_work_log(&line, now);
        }
        let again = Task::parse(&task.render().expect("renders")).expect("parses");
        prop_assert_eq!(again.work_log().len(), count);
        prop_assert_eq!(again.body.matches("## Work Log").count(), 1);
    }

    #[test]
    fn validation_and_parsing_never_panic(value in json_value()) {
        let _ = Envelope::from_value(&value);
        let _ = parse_input(&value.to_string());
        let _ = parse_input(&format!("AOF/1 {value}"));
    }
}
