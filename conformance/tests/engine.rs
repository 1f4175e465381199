//! The engine proved on a synthetic suite: checks that pass, fail, skip, error, time out, panic,
//! flake once and leave processes behind; baselines, shards, reports, and the test-infra
//! scenarios WS-063b (port retry) and WS-064b (teardown).

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use ski::transport::child::{ChildSpec, group_exists, process_exists};
use ski_conformance::baseline::{Baseline, Expectation};
use ski_conformance::report;
use ski_conformance::runner::{self, Plan, RunOptions, RunReport, ScenarioResult, Silent};
use ski_conformance::select::{Glob, Selection, Shard};
use ski_conformance::{
    CatalogSet, Check, CheckError, CheckResult, Ctx, OrFail, Outcome, Target, Timeouts, ensure,
    ensure_eq, skip,
};

const CATALOG: &str = r#"
suite = "synth"
document = "synthetic.md"

[capabilities]
stdio = "the target speaks on stdin and stdout"
teleport = "the target can teleport"

[[scenario]]
id = "SYN-PASS"
title = "a child echoes a line"
category = "happy-path"
level = "must"
given = "a child that echoes"
when = "a line is sent"
then = "the same line comes back"
source = "synthetic.md, 1"
requires = ["stdio"]

[[scenario]]
id = "SYN-FAIL"
title = "the answer is wrong"
category = "error"
level = "must"
given = "g"
when = "w"
then = "the answer is 42"
source = "synthetic.md, 2"
timeout = "short"

[[scenario]]
id = "SYN-SKIP-CAP"
title = "needs a capability the target lacks"
category = "edge-case"
level = "should"
given = "g"
when = "w"
then = "t"
source = "synthetic.md, 3"
requires = ["teleport"]

[[scenario]]
id = "SYN-SKIP-CHECK"
title = "the check decides to skip"
category = "edge-case"
level = "should"
given = "g"
when = "w"
then = "t"
source = "synthetic.md, 4"

[[scenario]]
id = "SYN-ERROR"
title = "the harness fails"
category = "error"
level = "must"
given = "g"
when = "w"
then = "t"
source = "synthetic.md, 5"

[[scenario]]
id = "SYN-TIMEOUT"
title = "the target never answers"
category = "boundary"
level = "must"
given = "a child that ignores SIGTERM"
when = "the check waits forever"
then = "an answer within the timeout"
source = "synthetic.md, 6"
timeout = "short"

[[scenario]]
id = "SYN-PANIC"
title = "the check panics"
category = "error"
level = "must"
given = "g"
when = "w"
then = "t"
source = "synthetic.md, 7"

[[scenario]]
id = "SYN-FLAKY"
title = "fails once then passes"
category = "concurrent"
level = "must"
given = "g"
when = "w"
then = "t"
source = "synthetic.md, 8"

[[scenario]]
id = "SYN-LEAK"
title = "the check leaves a process group behind"
category = "test-infra"
level = "must"
given = "g"
when = "w"
then = "every process is gone after the run"
source = "synthetic.md, 9"

[[scenario]]
id = "SYN-NOCHECK"
title = "a row without a check"
category = "happy-path"
level = "must"
given = "g"
when = "w"
then = "t"
source = "synthetic.md, 10"
"#;

const PROFILE: &str = r#"
name = "synthetic"
description = "processes started by the engine's own tests"

[vars]
greeting = "hello from {scenario}"

[suites.synth]
capabilities = ["stdio"]
env = { SYNTH_GREETING = "{greeting}", SYNTH_HOME = "{home}" }

[suites.synth.commands]
echo = "/bin/sh -c 'while read line; do echo \"$line\"; done'"
server = { argv = ["{bin_dir}/ski-conformance", "fixture", "tcp-listen", "{listen}"], ready = { line = "listening on" } }
quiet-server = "{bin_dir}/ski-conformance fixture tcp-listen {listen}"
racy-server = { argv = ["/bin/sh", "-c", "if [ ! -e \"$0\" ]; then : > \"$0\"; echo 'Address already in use' >&2; exit 98; fi; exec \"$1\" fixture tcp-listen \"$2\"", "{temp_dir}/first", "{bin_dir}/ski-conformance", "{listen}"], ready = { line = "listening on" } }

[suites.synth.overrides.SYN-PASS]
line = "ping from the profile"
"#;

fn catalogs() -> CatalogSet {
    CatalogSet::parse_all([("synth.toml", CATALOG)]).unwrap()
}

fn target() -> Arc<Target> {
    Arc::new(Target::parse("synthetic.toml", PROFILE).unwrap())
}

fn bin_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_ski-conformance"))
        .parent()
        .unwrap()
        .to_owned()
}

fn options(jobs: usize) -> RunOptions {
    RunOptions {
        jobs,
        // Short (5 s) becomes 1.5 s, so the timeout scenario is quick; normal (20 s) becomes 6 s,
        // ample for the scenarios that must pass on a loaded machine.
        timeouts: Timeouts::new(0.3),
        bin_dir: bin_dir(),
        rerun: true,
        keep_temp: false,
        temp_root: None,
        ..RunOptions::default()
    }
}

/// Pids of processes the synthetic checks started, to prove they are gone afterwards.
#[derive(Clone, Default)]
struct Pids(Arc<Mutex<Vec<u32>>>);

impl Pids {
    fn add(&self, pid: u32) {
        self.0.lock().unwrap().push(pid);
    }
    fn all(&self) -> Vec<u32> {
        self.0.lock().unwrap().clone()
    }
}

async fn pass(ctx: Ctx) -> CheckResult {
    ctx.require(ski_conformance::vocabulary::capability::STDIO)?;
    let line = ctx.text("line", "ping");
    let mut child = ctx.spawn_target("echo", &[])?;
    child.send_line(&line).await?;
    let echoed = ctx
        .within("an echoed line", child.next_line())
        .await?
        .or_fail("a readable stdout")?
        .or_fail("a line before end of output")?;
    ensure_eq!(line, echoed, "the echoed line");
    Ok(())
}

async fn fail(_ctx: Ctx) -> CheckResult {
    let answer = 41;
    ensure_eq!(42, answer, "the answer");
    Ok(())
}

async fn skip_in_check(_ctx: Ctx) -> CheckResult {
    skip!("the target has no way to do {}", "this")
}

async fn harness_error(ctx: Ctx) -> CheckResult {
    std::fs::read(ctx.temp_dir().join("missing-fixture.json"))?;
    Ok(())
}

fn checks(pids: &Pids, flaky_runs: &Arc<AtomicUsize>) -> Vec<Check> {
    let timeout_pids = pids.clone();
    let panic_pids = pids.clone();
    let leak_pids = pids.clone();
    let flaky_runs = Arc::clone(flaky_runs);
    vec![
        Check::new("SYN-PASS", "echoes a line through a child", pass),
        Check::new("SYN-FAIL", "compares 41 with 42", fail),
        Check::new(
            "SYN-SKIP-CAP",
            "never runs: the capability is missing",
            pass,
        ),
        Check::new("SYN-SKIP-CHECK", "skips from inside", skip_in_check),
        Check::new("SYN-ERROR", "reads a file that is not there", harness_error),
        Check::new(
            "SYN-TIMEOUT",
            "waits forever on a stubborn child",
            move |ctx: Ctx| {
                let pids = timeout_pids.clone();
                async move {
                    let mut child = ctx.spawn(
                        ChildSpec::new("stubborn", "/bin/sh")
                            .arg("-c")
                            .arg("trap '' TERM; echo ready; while :; do sleep 1; done"),
                    )?;
                    pids.add(child.pid());
                    ensure!(
                        child.next_line().await?.as_deref() == Some("ready"),
                        "the child says ready"
                    );
                    std::future::pending::<()>().await;
                    Ok(())
                }
            },
        ),
        Check::new(
            "SYN-PANIC",
            "panics with a child running",
            move |ctx: Ctx| {
                let pids = panic_pids.clone();
                async move {
                    let mut child = ctx.spawn(
                        ChildSpec::new("sleeper", "/bin/sh")
                            .arg("-c")
                            .arg("echo ready; exec sleep 600"),
                    )?;
                    pids.add(child.pid());
                    let _ = child.next_line().await;
                    panic!("synthetic panic in a check");
                }
            },
        ),
        Check::new(
            "SYN-FLAKY",
            "fails on its first run only, by a wait that runs out (which is re-run)",
            move |ctx: Ctx| {
                let runs = Arc::clone(&flaky_runs);
                async move {
                    if runs.fetch_add(1, Ordering::SeqCst) == 0 {
                        ctx.within_for(
                            std::time::Duration::from_millis(1),
                            "a second run",
                            std::future::pending::<()>(),
                        )
                        .await?;
                    }
                    Ok(())
                }
            },
        ),
        Check::new(
            "SYN-LEAK",
            "starts a group with a grandchild and walks away",
            move |ctx: Ctx| {
                let pids = leak_pids.clone();
                async move {
                    let mut child = ctx.spawn(
                        ChildSpec::new("leaker", "/bin/sh")
                            .arg("-c")
                            .arg("trap '' TERM; (trap '' TERM; sleep 600) & echo $!; wait"),
                    )?;
                    pids.add(child.pid());
                    let grandchild: u32 = child
                        .next_line()
                        .await?
                        .and_then(|l| l.trim().parse().ok())
                        .ok_or_else(|| CheckError::harness("the leaker did not print a pid"))?;
                    pids.add(grandchild);
                    // Forget the handle: only the runner's teardown can end the group now.
                    std::mem::forget(child);
                    Ok(())
                }
            },
        ),
    ]
}

fn result<'a>(report: &'a RunReport, id: &str) -> &'a ScenarioResult {
    report.results.iter().find(|r| r.id == id).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_outcome_is_reported_and_nothing_survives() {
    let pids = Pids::default();
    let flaky_runs = Arc::new(AtomicUsize::new(0));
    let catalogs = catalogs();
    let plan = Plan::new(&catalogs, checks(&pids, &flaky_runs), &Selection::default()).unwrap();
    assert_eq!(plan.len(), 10);
    let report = runner::run(plan, target(), &options(4), None, &Silent).await;

    let outcomes: Vec<(&str, Outcome)> = report
        .results
        .iter()
        .map(|r| (r.id.as_str(), r.outcome))
        .collect();
    assert_eq!(
        outcomes,
        [
            ("SYN-PASS", Outcome::Pass),
            ("SYN-FAIL", Outcome::Fail),
            ("SYN-SKIP-CAP", Outcome::Skip),
            ("SYN-SKIP-CHECK", Outcome::Skip),
            ("SYN-ERROR", Outcome::Error),
            ("SYN-TIMEOUT", Outcome::Fail),
            ("SYN-PANIC", Outcome::Error),
            ("SYN-FLAKY", Outcome::Pass),
            ("SYN-LEAK", Outcome::Pass),
            ("SYN-NOCHECK", Outcome::Error),
        ]
    );

    // The pass ran a real child through the profile and logged both directions; a passing row
    // keeps only the count of its wire-log entries.
    let passed = result(&report, "SYN-PASS");
    assert!(passed.wire.is_empty(), "{}", passed.wire_text());
    assert!(passed.wire_lines >= 2, "{}", passed.wire_lines);
    assert!(!passed.flaky);
    assert_eq!(passed.processes.len(), 1);

    let failed = result(&report, "SYN-FAIL");
    let failure = failed.failure.as_ref().unwrap();
    assert_eq!(
        (failure.expected.as_str(), failure.actual.as_str()),
        ("42", "41")
    );
    assert_eq!(failure.check, "the answer");
    assert_eq!(failed.then, "the answer is 42");
    assert_eq!(failed.expectation, Expectation::Unexpected);
    // An observation of the target: not re-run, and the result says why.
    assert!(failed.first_attempt.is_none());
    assert_eq!(failed.attempts, 1);
    assert!(
        failed
            .rerun
            .as_deref()
            .is_some_and(|why| why.starts_with("not re-run: it observed the target (the answer)")),
        "{:?}",
        failed.rerun
    );

    let cap = result(&report, "SYN-SKIP-CAP");
    assert!(cap.message.as_ref().unwrap().contains("teleport"));
    assert!(cap.wire.is_empty(), "a skipped scenario never runs");
    assert!(
        result(&report, "SYN-SKIP-CHECK")
            .message
            .as_ref()
            .unwrap()
            .contains("no way to do this")
    );
    assert!(
        result(&report, "SYN-ERROR")
            .message
            .as_ref()
            .unwrap()
            .contains("No such file")
    );

    let timed_out = result(&report, "SYN-TIMEOUT");
    assert!(timed_out.timed_out);
    assert!(timed_out.processes.iter().all(|p| p.gone && p.killed));

    let panicked = result(&report, "SYN-PANIC");
    assert!(
        panicked
            .message
            .as_ref()
            .unwrap()
            .contains("synthetic panic in a check")
    );

    let flaky = result(&report, "SYN-FLAKY");
    assert!(flaky.flaky, "passed on the solo re-run");
    assert_eq!(flaky.first_attempt.as_ref().unwrap().outcome, Outcome::Fail);
    // A must row that passed only on its re-run counts against the verdict.
    assert_eq!(flaky.expectation, Expectation::Unexpected);
    assert!(flaky.fails_run(false));
    assert_eq!(flaky_runs.load(Ordering::SeqCst), 2);

    let leak = result(&report, "SYN-LEAK");
    assert_eq!(leak.processes.len(), 1);
    assert!(leak.processes[0].killed && leak.processes[0].gone);

    assert!(
        result(&report, "SYN-NOCHECK")
            .message
            .as_ref()
            .unwrap()
            .contains("no check")
    );

    // Every process any check started is gone, with its process group, by pid.
    let started = pids.all();
    assert!(started.len() >= 5, "{started:?}");
    for pid in started {
        assert!(!process_exists(pid), "process {pid} survived the run");
        assert!(!group_exists(pid), "process group {pid} survived the run");
    }

    let counts = report.counts();
    assert_eq!(
        (
            counts.pass,
            counts.fail,
            counts.skip,
            counts.error,
            counts.flaky
        ),
        (3, 2, 2, 3, 1)
    );
    assert_eq!(report.exit_code(), 1);

    check_reports(&report);
}

fn check_reports(report: &RunReport) {
    let dir = tempfile::tempdir().unwrap();
    let written = report::write_all(report, dir.path()).unwrap();

    let xml = std::fs::read_to_string(&written.junit).unwrap();
    let junit = quick_junit::Report::deserialize_from_str(&xml).unwrap();
    assert_eq!(junit.test_suites.len(), 1);
    let suite = &junit.test_suites[0];
    assert_eq!(suite.test_cases.len(), 10);
    assert_eq!(suite.failures, 2);
    assert_eq!(suite.errors, 3);
    let skipped = suite
        .test_cases
        .iter()
        .filter(|c| matches!(c.status, quick_junit::TestCaseStatus::Skipped { .. }))
        .count();
    assert_eq!(skipped, 2);
    let flaky_case = suite
        .test_cases
        .iter()
        .find(|c| c.name.as_str().starts_with("SYN-FLAKY"))
        .unwrap();
    assert!(
        matches!(&flaky_case.status, quick_junit::TestCaseStatus::Success { flaky_runs } if flaky_runs.len() == 1)
    );
    let fail_case = suite
        .test_cases
        .iter()
        .find(|c| c.name.as_str().starts_with("SYN-FAIL"))
        .unwrap();
    let quick_junit::TestCaseStatus::NonSuccess { description, .. } = &fail_case.status else {
        panic!("SYN-FAIL is not a failure in JUnit");
    };
    let description = description.as_ref().unwrap().as_str();
    assert!(description.contains("Expected: 42"), "{description}");
    assert!(description.contains("Actual: 41"), "{description}");
    assert!(
        description.contains("Then: the answer is 42"),
        "{description}"
    );

    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&written.json).unwrap()).unwrap();
    assert_eq!(json["exit_code"], 1);
    assert_eq!(json["counts"]["flaky"], 1);
    let results = json["results"].as_array().unwrap();
    assert_eq!(results.len(), 10);
    let pass = results.iter().find(|r| r["id"] == "SYN-PASS").unwrap();
    assert!(pass.get("wire").is_none(), "{pass}");
    assert!(pass["wire_lines"].as_u64().unwrap() >= 2, "{pass}");
    let panicked = results.iter().find(|r| r["id"] == "SYN-PANIC").unwrap();
    let wire = panicked["wire"].as_array().unwrap();
    assert!(wire.iter().any(|w| w["text"] == "ready"), "{panicked}");
    assert!(
        wire.iter()
            .all(|w| w["t"].is_number() && w["channel"].is_string())
    );
    let fail = results.iter().find(|r| r["id"] == "SYN-FAIL").unwrap();
    assert_eq!(fail["failure"]["expected"], "42");

    let md = std::fs::read_to_string(&written.markdown).unwrap();
    for row in [
        "| SYN-PASS | a child echoes a line | must | pass |",
        "| [SYN-FAIL](#failure-syn-fail) | the answer is wrong | must | **FAIL** |",
        "| SYN-SKIP-CAP | needs a capability the target lacks | should | skip: ",
        "| [SYN-FLAKY](#failure-syn-flaky) | fails once then passes | must | pass (flaky) |",
        "| synth | happy-path | 1 | 0 | 0 | 1 | 0 | 0 | 0 | 2 |",
        "| **all** |  | 3 | 2 | 2 | 3 | 1 | 0 | 0 | 10 |",
        "### test-infra",
        "- **Expected**: 42",
        "- **Actual**: 41",
        "- **Then** (spec): the answer is 42",
        "Wire log (",
    ] {
        assert!(md.contains(row), "report.md lacks {row:?}:\n{md}");
    }
}

const SMALL: &str = r#"
suite = "mini"
document = "mini.md"

[[scenario]]
id = "M-PASS"
title = "passes"
category = "happy-path"
level = "must"
given = "g"
when = "w"
then = "t"
source = "s"

[[scenario]]
id = "M-FAIL"
title = "fails"
category = "error"
level = "must"
given = "g"
when = "w"
then = "t"
source = "s"
"#;

async fn run_mini(baseline: Option<&Baseline>) -> RunReport {
    let catalogs = CatalogSet::parse_all([("mini.toml", SMALL)]).unwrap();
    let checks = vec![
        Check::new("M-PASS", "passes", |_ctx: Ctx| async { Ok(()) }),
        Check::new("M-FAIL", "fails one named assertion", fail),
    ];
    let plan = Plan::new(&catalogs, checks, &Selection::default()).unwrap();
    let target = Arc::new(Target::parse("t.toml", "[suites.mini]\n").unwrap());
    let mut options = options(2);
    options.rerun = false;
    runner::run(plan, target, &options, baseline, &Silent).await
}

#[tokio::test]
async fn baselines_are_strict_and_stale_entries_fail_the_run() {
    let none = run_mini(None).await;
    assert_eq!(none.exit_code(), 1, "an unlisted failure fails the run");

    let exact = Baseline::parse(
        "exact.toml",
        "[[failure]]\nid = \"M-FAIL\"\nreason = \"known\"\n",
    )
    .unwrap();
    let report = run_mini(Some(&exact)).await;
    assert_eq!(report.exit_code(), 0);
    assert_eq!(report.counts().expected_failures, 1);

    let scoped = Baseline::parse(
        "scoped.toml",
        "[[failure]]\nid = \"M-FAIL\"\ncheck = \"the answer\"\nreason = \"known\"\n",
    )
    .unwrap();
    assert_eq!(run_mini(Some(&scoped)).await.exit_code(), 0);

    let wrong_check = Baseline::parse(
        "wrong.toml",
        "[[failure]]\nid = \"M-FAIL\"\ncheck = \"another assertion\"\nreason = \"known\"\n",
    )
    .unwrap();
    let report = run_mini(Some(&wrong_check)).await;
    assert_eq!(report.exit_code(), 1, "only the named assertion is excused");
    assert_eq!(
        result(&report, "M-FAIL").expectation,
        Expectation::Unexpected
    );

    let stale = Baseline::parse(
        "stale.toml",
        "[[failure]]\nid = \"M-FAIL\"\nreason = \"known\"\n\n[[failure]]\nid = \"M-PASS\"\nreason = \"fixed since\"\n",
    )
    .unwrap();
    let report = run_mini(Some(&stale)).await;
    assert_eq!(
        report.exit_code(),
        1,
        "a listed scenario that passes is stale"
    );
    assert_eq!(report.stale.len(), 1);
    assert_eq!(report.stale[0].id, "M-PASS");
    assert_eq!(result(&report, "M-PASS").expectation, Expectation::Stale);
    let md = report::markdown::render(&report);
    assert!(md.contains("## Stale baseline entries"), "{md}");
    assert!(md.contains("`M-PASS`: fixed since"), "{md}");
}

#[test]
fn shards_partition_the_catalog_by_id_and_stay_put() {
    let mut text = String::from("suite = \"many\"\ndocument = \"d\"\n");
    for i in 0..60 {
        text.push_str(&format!(
            "[[scenario]]\nid = \"X-{i:03}\"\ntitle = \"t\"\ncategory = \"edge-case\"\nlevel = \"must\"\ngiven = \"g\"\nwhen = \"w\"\nthen = \"t\"\nsource = \"s\"\n"
        ));
    }
    let catalogs = CatalogSet::parse_all([("many.toml", text.as_str())]).unwrap();
    let all: Vec<String> = catalogs.scenarios().map(|s| s.id.clone()).collect();
    for count in 1..=5 {
        let mut seen: Vec<String> = Vec::new();
        for index in 1..=count {
            let selection = Selection {
                shard: Some(Shard::new(index, count).unwrap()),
                ..Selection::default()
            };
            let part: Vec<String> = selection
                .apply(&catalogs)
                .into_iter()
                .map(|s| s.id.clone())
                .collect();
            if count > 1 {
                assert!(
                    part.len() < all.len(),
                    "shard {index}/{count} took everything"
                );
            }
            seen.extend(part);
        }
        seen.sort();
        assert_eq!(
            seen, all,
            "shards of {count} must cover every ID exactly once"
        );
    }
    // A scenario keeps its shard when others are removed from the selection.
    let narrowed = Selection {
        ids: vec![Glob::parse("X-01*").unwrap()],
        shard: Some(Shard::new(2, 3).unwrap()),
        ..Selection::default()
    };
    let wide = Selection {
        shard: Some(Shard::new(2, 3).unwrap()),
        ..Selection::default()
    };
    let wide_ids: Vec<&str> = wide
        .apply(&catalogs)
        .iter()
        .map(|s| s.id.as_str())
        .collect();
    for s in narrowed.apply(&catalogs) {
        assert!(wide_ids.contains(&s.id.as_str()));
    }
}

/// WS-063b: a candidate port that is already in use, whether the harness sees it first or the
/// target reports it, leads to a new port instead of a failure.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_port_in_use_is_retried_on_a_new_port() {
    let catalogs = catalogs();
    let occupied = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = occupied.local_addr().unwrap().port();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let record = Arc::clone(&seen);
    let check = Check::new(
        "SYN-PASS",
        "starts a racy server next to a taken port",
        move |ctx: Ctx| {
            let record = Arc::clone(&record);
            async move {
                let listening = ctx.spawn_listening("racy-server", &[], Some(port)).await?;
                tokio::net::TcpStream::connect(listening.addr)
                    .await
                    .or_fail("the server accepts a connection")?;
                record
                    .lock()
                    .unwrap()
                    .push((listening.addr, listening.attempts.clone()));
                Ok(())
            }
        },
    );
    let selection = Selection {
        ids: vec![Glob::parse("SYN-PASS").unwrap()],
        ..Selection::default()
    };
    let plan = Plan::new(&catalogs, vec![check], &selection).unwrap();
    let report = runner::run(plan, target(), &options(1), None, &Silent).await;
    let only = &report.results[0];
    assert_eq!(
        only.outcome,
        Outcome::Pass,
        "{:?} {:?}",
        only.failure,
        only.message
    );
    let seen = seen.lock().unwrap();
    let (addr, attempts) = &seen[0];
    assert_ne!(addr.port(), port);
    let results: Vec<&str> = attempts.iter().map(|a| a.result.as_str()).collect();
    assert_eq!(results.len(), 3, "{attempts:?}");
    assert_eq!(attempts[0].addr.port(), port);
    assert_eq!(results[0], "in use", "the harness saw the taken port first");
    assert!(
        results[1].starts_with("in use: "),
        "then the target reported one: {attempts:?}"
    );
    assert_eq!(results[2], "ok");
    drop(occupied);
}

/// WS-064b: after a scenario, success or failure, the server it started is gone and its
/// address is free again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn teardown_closes_servers_after_success_and_failure() {
    let catalogs = catalogs();
    let addrs = Arc::new(Mutex::new(Vec::new()));
    let in_check = Arc::clone(&addrs);
    let check = Check::new(
        "SYN-PASS",
        "starts a server and verifies teardown",
        move |ctx: Ctx| {
            let addrs = Arc::clone(&in_check);
            async move {
                // The default readiness: a TCP connection succeeds.
                let quiet = ctx.spawn_listening("quiet-server", &[], None).await?;
                addrs.lock().unwrap().push((quiet.addr, quiet.child.pid()));
                let listening = ctx.spawn_listening("server", &[], None).await?;
                let pid = listening.child.pid();
                addrs.lock().unwrap().push((listening.addr, pid));
                ensure!(
                    !ski_conformance::port::is_free(listening.addr).await,
                    "the server holds its port"
                );
                let terminations = ctx.ensure_torn_down(&[listening.addr, quiet.addr]).await?;
                ensure_eq!(2, terminations.len(), "processes torn down");
                Ok(())
            }
        },
    );
    let left = Arc::clone(&addrs);
    let failing = Check::new("SYN-FAIL", "starts a server and fails", move |ctx: Ctx| {
        let addrs = Arc::clone(&left);
        async move {
            let listening = ctx.spawn_listening("server", &[], None).await?;
            addrs
                .lock()
                .unwrap()
                .push((listening.addr, listening.child.pid()));
            std::mem::forget(listening);
            ensure_eq!(1, 2, "a deliberate failure");
            Ok(())
        }
    });
    let selection = Selection {
        ids: vec![
            Glob::parse("SYN-PASS").unwrap(),
            Glob::parse("SYN-FAIL").unwrap(),
        ],
        ..Selection::default()
    };
    let plan = Plan::new(&catalogs, vec![check, failing], &selection).unwrap();
    let mut options = options(2);
    options.rerun = false;
    let report = runner::run(plan, target(), &options, None, &Silent).await;
    let pass = result(&report, "SYN-PASS");
    assert_eq!(
        pass.outcome,
        Outcome::Pass,
        "{:?} {:?}",
        pass.failure,
        pass.message
    );
    assert_eq!(result(&report, "SYN-FAIL").outcome, Outcome::Fail);
    let addrs = addrs.lock().unwrap().clone();
    assert_eq!(addrs.len(), 3);
    for (addr, pid) in &addrs {
        assert!(
            ski_conformance::port::is_free(*addr).await,
            "{addr} still in use"
        );
        assert!(!group_exists(*pid));
    }
}

#[tokio::test]
async fn profile_env_and_placeholders_reach_the_child() {
    let catalogs = catalogs();
    let check = Check::new("SYN-PASS", "reads its environment", |ctx: Ctx| async move {
        let spec = ctx.command("echo", &[])?;
        let mut child = ctx.spawn(
            ChildSpec::new("env", "/bin/sh")
                .arg("-c")
                .arg("echo \"$SYNTH_GREETING\"; pwd; cd \"$SYNTH_HOME\" && pwd")
                .envs(
                    spec.get_env()
                        .iter()
                        .filter_map(|(k, v)| v.as_ref().map(|v| (k.clone(), v.clone()))),
                ),
        )?;
        let greeting = child.next_line().await?.unwrap_or_default();
        ensure_eq!(
            "hello from SYN-PASS",
            greeting.as_str(),
            "the rendered profile env"
        );
        let cwd = child.next_line().await?.unwrap_or_default();
        let temp = ctx.temp_dir().canonicalize()?;
        ensure_eq!(temp.display().to_string(), cwd, "the working directory");
        // {home} is a directory of the scenario's own that the harness made.
        let home = child.next_line().await?.unwrap_or_default();
        ensure_eq!(
            temp.join("home").display().to_string(),
            home,
            "the scenario's home directory"
        );
        Ok(())
    });
    let selection = Selection {
        ids: vec![Glob::parse("SYN-PASS").unwrap()],
        ..Selection::default()
    };
    let plan = Plan::new(&catalogs, vec![check], &selection).unwrap();
    let report = runner::run(plan, target(), &options(1), None, &Silent).await;
    let only = &report.results[0];
    assert_eq!(
        only.outcome,
        Outcome::Pass,
        "{:?} {:?}",
        only.failure,
        only.message
    );
}

#[test]
fn a_duplicate_check_is_a_plan_error() {
    let catalogs = catalogs();
    let checks = vec![
        Check::new("SYN-PASS", "one", pass),
        Check::new("SYN-PASS", "two", pass),
    ];
    let err = Plan::new(&catalogs, checks, &Selection::default()).unwrap_err();
    assert!(err.to_string().contains("SYN-PASS"));
}

#[tokio::test]
async fn within_fails_with_what_was_awaited_scaled_by_the_multiplier() {
    let catalogs = catalogs();
    let check = Check::new("SYN-FAIL", "waits for nothing", |ctx: Ctx| async move {
        ctx.within_for(
            std::time::Duration::from_millis(50),
            "an answer",
            std::future::pending::<()>(),
        )
        .await?;
        Ok(())
    });
    let selection = Selection {
        ids: vec![Glob::parse("SYN-FAIL").unwrap()],
        ..Selection::default()
    };
    let plan = Plan::new(&catalogs, vec![check], &selection).unwrap();
    let mut options = options(1);
    options.rerun = false;
    let report = runner::run(plan, target(), &options, None, &Silent).await;
    let only = &report.results[0];
    assert_eq!(only.outcome, Outcome::Fail);
    assert!(!only.timed_out, "the check's own limit came first");
    let failure = only.failure.as_ref().unwrap();
    assert_eq!(failure.check, "an answer");
    // 50 ms times the multiplier 0.3.
    assert_eq!(failure.expected, "an answer within 15ms");
}
