//! `ski-conformance matrix`: one selection against several targets in one table. The page is
//! checked as a structure (every row and target present, every link an anchor of the page, no
//! external load, everything a target wrote escaped), its cells against each target's own `run`,
//! and, where a headless Chromium is installed, rendered once.

use crate::support;

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde_json::{Value, json};
use support::ski_conformance;

/// What a target writes that would run as script if the page did not escape it.
const INJECTION: &str = "</pre><script>alert(\"injected\")</script><img src=x onerror=alert(1)>";

fn mock_agent() -> PathBuf {
    let path = Path::new(env!("CARGO_BIN_EXE_ski-conformance"))
        .parent()
        .expect("the binary has a directory")
        .join("ski-mock-agent");
    assert!(
        path.is_file(),
        "{} is missing: run `cargo build --workspace --bins`",
        path.display()
    );
    path
}

/// A `results.json` row as a run writes it.
fn row(id: &str, outcome: &str, extra: Value) -> Value {
    let mut row = json!({
        "suite": "acp",
        "id": id,
        "title": format!("row {id} {INJECTION}"),
        "category": "happy-path",
        "level": "must",
        "source": "s",
        "then": "t",
        "outcome": outcome,
        "flaky": false,
        "timed_out": false,
        "expectation": if matches!(outcome, "fail" | "error") { "unexpected" } else { "as-expected" },
        "duration": 0.1,
        "failure": null,
        "message": null,
        "processes": [],
    });
    if let (Some(row), Value::Object(extra)) = (row.as_object_mut(), extra) {
        row.extend(extra);
    }
    row
}

/// Writes `dir/results.json` of a run against `target` with `rows`.
fn results(dir: &Path, target: &str, rows: Vec<Value>) {
    std::fs::create_dir_all(dir).expect("the results dir");
    let document = json!({
        "format": "ski-conformance-results/1",
        "target": target,
        "target_description": format!("a target that writes {INJECTION}"),
        "started": "2026-01-01T00:00:00Z",
        "duration": 1.0,
        "selection": "suite acp",
        "timeout_multiplier": 1.0,
        "jobs": 1,
        "baseline": null,
        "results": rows,
        "stale": [],
    });
    std::fs::write(
        dir.join("results.json"),
        serde_json::to_string_pretty(&document).expect("json"),
    )
    .expect("results.json is written");
}

/// Every `id="..."` of the page.
fn ids(html: &str) -> BTreeSet<String> {
    attribute_values(html, " id=\"").into_iter().collect()
}

fn attribute_values(html: &str, prefix: &str) -> Vec<String> {
    html.match_indices(prefix)
        .filter_map(|(at, _)| {
            let rest = &html[at + prefix.len()..];
            rest.find('"').map(|end| rest[..end].to_owned())
        })
        .collect()
}

/// Every tag of the page: its name and its attributes' names. Text a page escapes holds no `<`,
/// so each `<` starts a tag the page wrote.
fn tags(html: &str) -> Vec<(String, Vec<String>)> {
    html.split('<')
        .skip(1)
        .map(|rest| {
            let tag = rest.split('>').next().unwrap_or_default();
            let (name, mut attributes) = tag.split_once(char::is_whitespace).unwrap_or((tag, ""));
            let mut names = Vec::new();
            loop {
                attributes = attributes.trim_start();
                if attributes.is_empty() {
                    break;
                }
                let end = attributes
                    .find(|c: char| c == '=' || c.is_whitespace())
                    .unwrap_or(attributes.len());
                names.push(attributes[..end].to_lowercase());
                attributes = &attributes[end..];
                if let Some(value) = attributes.strip_prefix("=\"") {
                    let close = value.find('"').unwrap_or_else(|| {
                        panic!("<{tag}>: an attribute never ends (markup let through unescaped)")
                    });
                    attributes = &value[close + 1..];
                } else if let Some(value) = attributes.strip_prefix('=') {
                    // An unquoted value, which the page never writes: up to the next space.
                    let end = value.find(char::is_whitespace).unwrap_or(value.len());
                    attributes = &value[end..];
                }
            }
            (name.to_lowercase(), names)
        })
        .collect()
}

/// The page holds one script (its own), loads nothing from anywhere, has no event handler or
/// element a target could have slipped in, and every link is an anchor of the page that exists.
fn assert_self_contained(html: &str) {
    const ELEMENTS: &[&str] = &[
        "!doctype", "html", "head", "meta", "title", "style", "body", "h1", "h2", "h3", "h4", "p",
        "table", "thead", "tbody", "tr", "th", "td", "a", "form", "label", "select", "option",
        "input", "span", "section", "dl", "dt", "dd", "pre", "code", "small", "br", "script", "ul",
        "li",
    ];
    let tags = tags(html);
    for (name, attributes) in &tags {
        let element = name.trim_start_matches('/');
        assert!(ELEMENTS.contains(&element), "element <{name}>");
        for attribute in attributes {
            assert!(
                !attribute.starts_with("on") && !matches!(attribute.as_str(), "src" | "srcset"),
                "<{name} {attribute}=...>"
            );
        }
    }
    assert_eq!(
        tags.iter().filter(|(name, _)| name == "script").count(),
        1,
        "one script only"
    );
    assert!(
        html.contains("<script>\n(function(){"),
        "the page's own script"
    );
    let style = html
        .split("<style>")
        .nth(1)
        .and_then(|s| s.split("</style>").next())
        .expect("the page's style");
    for external in ["url(", "@import", "//"] {
        assert!(!style.contains(external), "the style has {external}");
    }
    assert!(
        html.contains("Content-Security-Policy\" content=\"default-src 'none'"),
        "no Content-Security-Policy"
    );
    let ids = ids(html);
    let hrefs = attribute_values(html, "href=\"");
    assert!(!hrefs.is_empty(), "no links");
    for href in hrefs {
        let anchor = href
            .strip_prefix('#')
            .unwrap_or_else(|| panic!("{href} is not an anchor of the page"));
        assert!(ids.contains(anchor), "{href} resolves to nothing");
    }
}

/// The column labels of the matrix, in order.
fn labels(html: &str) -> Vec<String> {
    let header = html
        .split("<table id=\"matrix\">")
        .nth(1)
        .and_then(|t| t.split("</thead>").next())
        .expect("the matrix has a header");
    header
        .split("<th><a href=\"#t-")
        .skip(1)
        .filter_map(|th| {
            let start = th.find('>')? + 1;
            let end = th.find("</a>")?;
            Some(th[start..end].to_owned())
        })
        .collect()
}

/// Each row's ID and its cells' verdicts, in column order.
fn cells(html: &str) -> BTreeMap<String, Vec<String>> {
    html.lines()
        .filter(|line| line.starts_with("<tr id=\"r-"))
        .map(|line| {
            let id = attribute_values(line, "data-id=\"")
                .pop()
                .expect("a row has its ID");
            (id, attribute_values(line, "data-verdict=\""))
        })
        .collect()
}

/// The verdict of each row of a run's `results.json`, as the matrix names it.
fn run_verdicts(path: &Path) -> BTreeMap<String, String> {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let document: Value = serde_json::from_str(&text).expect("results.json is JSON");
    document["results"]
        .as_array()
        .expect("results")
        .iter()
        .map(|r| {
            let outcome = r["outcome"].as_str().expect("an outcome");
            let verdict = match outcome {
                "skip" if r["not_tested"].as_bool() == Some(true) => "not-tested",
                other => other,
            };
            (
                r["id"].as_str().expect("an id").to_owned(),
                verdict.to_owned(),
            )
        })
        .collect()
}

/// Two earlier runs with every verdict, and a target whose run cannot start: the page has every
/// row and target, resolves every link, loads nothing, escapes what the targets wrote, and the
/// target without results says why.
#[tokio::test]
async fn a_matrix_of_earlier_runs_shows_every_row_and_target_and_escapes_what_they_wrote() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let wire = json!([{ "channel": "agent", "direction": "in", "t": 0.5, "text": format!("{{\"x\":\"{INJECTION}\"}}") }]);
    results(
        &dir.path().join("runs/one"),
        "one",
        vec![
            row("X-001", "pass", json!({})),
            row("X-002", "pass", json!({ "flaky": true })),
            row(
                "X-003",
                "skip",
                json!({ "message": format!("lacks {INJECTION}") }),
            ),
        ],
    );
    results(
        &dir.path().join("runs/two"),
        "two",
        vec![
            row(
                "X-001",
                "fail",
                json!({
                    "failure": { "check": "the answer", "expected": "end_turn", "actual": INJECTION },
                    "wire": wire,
                    "wire_lines": 1,
                }),
            ),
            row(
                "X-002",
                "blocked",
                json!({ "message": format!("session/new refused: {INJECTION}") }),
            ),
            row(
                "X-003",
                "skip",
                json!({ "not_tested": true, "message": "could not hold a turn" }),
            ),
            row("X-004", "error", json!({ "message": INJECTION })),
        ],
    );
    let run = ski_conformance(
        &[
            "matrix",
            "--from",
            "one=runs/one",
            "--from",
            "second=runs/two/results.json",
            "--target",
            "ghost=/nonexistent/ghost.toml",
            "--out",
            "out",
        ],
        dir.path(),
    )
    .await;
    assert_eq!(run.code, Some(2), "{}{}", run.stdout, run.stderr);
    assert!(
        run.stdout
            .contains("ghost: the run exited 2 and wrote no results.json"),
        "{}",
        run.stdout
    );
    let html = std::fs::read_to_string(dir.path().join("out/report.html")).expect("report.html");
    assert_self_contained(&html);
    assert!(html.contains("&lt;/pre&gt;&lt;script&gt;alert(&quot;injected&quot;)&lt;/script&gt;"));
    assert_eq!(labels(&html), ["one", "second", "ghost"]);
    let expected: BTreeMap<String, Vec<String>> = [
        ("X-001", ["pass", "fail", "not-run"]),
        ("X-002", ["pass", "blocked", "not-run"]),
        ("X-003", ["skip", "not-tested", "not-run"]),
        ("X-004", ["not-run", "error", "not-run"]),
    ]
    .into_iter()
    .map(|(id, v)| (id.to_owned(), v.iter().map(|s| s.to_string()).collect()))
    .collect();
    assert_eq!(cells(&html), expected);
    assert!(html.contains(">pass (flaky)<"), "the flaky pass says so");
    // The failing cell links to its section, which holds Expected, Actual and the wire log.
    let section = html
        .split("<section class=\"cell\" id=\"c-0-1\">")
        .nth(1)
        .and_then(|s| s.split("</section>").next())
        .expect("the failing cell's section");
    assert!(
        section.contains("<dt>Expected</dt><dd><pre>end_turn</pre>"),
        "{section}"
    );
    assert!(
        section.contains("+0.500000s agent in {&quot;x&quot;"),
        "{section}"
    );
    // The blocked and erroring cells link to sections of their own; the untested one to the
    // section of its reason, shared by every row the target left untested for it.
    for anchor in ["c-1-1", "c-3-1", "n-1-0"] {
        assert!(html.contains(&format!("href=\"#{anchor}\"")), "{anchor}");
    }

    let md = std::fs::read_to_string(dir.path().join("out/matrix.md")).expect("matrix.md");
    assert!(
        md.contains("| Suite | ID | Level | Title | one | second | ghost |"),
        "{md}"
    );
    assert!(!md.contains("<script"), "{md}");
    assert!(md.contains("| acp | X-001 | must |"), "{md}");
    assert!(md.contains("no results: the run exited 2"), "{md}");

    // Rows of earlier runs are selected as a run selects them.
    let run = ski_conformance(
        &[
            "matrix",
            "--from",
            "one=runs/one",
            "--from",
            "two=runs/two",
            "--id",
            "X-00[24]",
            "--out",
            "some",
        ],
        dir.path(),
    )
    .await;
    assert_eq!(run.code, Some(1), "{}{}", run.stdout, run.stderr);
    let html = std::fs::read_to_string(dir.path().join("some/report.html")).expect("report.html");
    assert_self_contained(&html);
    assert_eq!(
        cells(&html).keys().collect::<Vec<_>>(),
        ["X-002", "X-004"],
        "the selected rows"
    );
}

/// The reference (a profile) and a mock agent with a defect (an ad-hoc command) in one matrix:
/// each cell is what that target's own `run` says of the row, both the run the matrix made and
/// a separate one, and what the defect wrote on the wire is escaped.
#[tokio::test]
async fn a_matrix_over_two_targets_matches_each_targets_own_run() {
    let dir = tempfile::tempdir().expect("a temp dir");
    // Answers every prompt with markup and a stop reason the schema does not have.
    std::fs::write(
        dir.path().join("defect.toml"),
        format!(
            "[[on]]\nprompt = \"*\"\ndo = [\n  {{ update = {{ sessionUpdate = \"agent_message_chunk\", content = {{ type = \"text\", text = {text} }} }} }},\n  {{ respond = {{ stopReason = {text} }} }},\n]\n",
            text = toml::Value::String(INJECTION.to_owned())
        ),
    )
    .expect("the script is written");
    let defect = format!(
        "{} --script {}",
        mock_agent().display(),
        dir.path().join("defect.toml").display()
    );
    let selection = [
        "--suite",
        "acp",
        "--id",
        "WS-00[12]",
        "--id",
        "ACP-CORE-04*",
        "-j",
        "2",
    ];
    let ad_hoc = [
        "--no-discover",
        "--capability",
        "agent",
        "--capability",
        "stdio",
        "--capability",
        "session",
        "--capability",
        "prompt",
    ];
    let defect_column = format!("defect={defect}");
    let mut args = vec![
        "matrix",
        "--target",
        "ref=reference",
        "--agent-cmd",
        &defect_column,
        "--out",
        "out",
    ];
    args.extend(selection);
    args.extend(ad_hoc);
    let matrix = ski_conformance(&args, dir.path()).await;
    assert_eq!(matrix.code, Some(1), "{}{}", matrix.stdout, matrix.stderr);

    let mut own = vec!["run", "--target", "reference", "--out", "own-ref"];
    own.extend(selection);
    let reference = ski_conformance(&own, dir.path()).await;
    let mut own = vec!["run", "--agent-cmd", &defect, "--out", "own-defect"];
    own.extend(selection);
    own.extend(ad_hoc);
    let defective = ski_conformance(&own, dir.path()).await;
    assert_eq!(reference.code, Some(0), "{}", reference.stdout);
    assert_eq!(defective.code, Some(1), "{}", defective.stdout);

    let html = std::fs::read_to_string(dir.path().join("out/report.html")).expect("report.html");
    assert_self_contained(&html);
    assert!(
        html.contains("&lt;/pre&gt;&lt;script&gt;"),
        "the defect's markup"
    );
    assert_eq!(labels(&html), ["ref", "defect"]);
    let cells = cells(&html);
    for (column, runs) in [
        (0, ["out/ref/results.json", "own-ref/results.json"]),
        (1, ["out/defect/results.json", "own-defect/results.json"]),
    ] {
        for run in runs {
            let verdicts = run_verdicts(&dir.path().join(run));
            assert_eq!(
                verdicts.keys().collect::<BTreeSet<_>>(),
                cells.keys().collect::<BTreeSet<_>>(),
                "{run}: the rows"
            );
            for (id, verdict) in &verdicts {
                assert_eq!(&cells[id][column], verdict, "{id} in {run}");
            }
        }
    }
    // Each column's counts are its run's own (results.json's counts, skip including untested).
    for (n, run) in ["out/ref/results.json", "out/defect/results.json"]
        .iter()
        .enumerate()
    {
        let text = std::fs::read_to_string(dir.path().join(run)).expect("results.json");
        let document: Value = serde_json::from_str(&text).expect("json");
        let c = &document["counts"];
        let expected: Vec<String> = ["pass", "fail", "error", "blocked", "skip", "not_tested"]
            .iter()
            .map(|k| c[k].as_u64().expect("a count").to_string())
            .collect();
        let shown = between(&html, &format!("<tr id=\"t-{n}\">"), "</tr>");
        let shown: Vec<String> = shown
            .split("<td class=\"count\">")
            .skip(1)
            .filter_map(|c| c.split('<').next())
            .take(6)
            .map(str::to_owned)
            .collect();
        assert_eq!(shown, expected, "{run}");
        // And the run recorded what it ran and which ski ran it.
        assert_eq!(
            document["ski_version"],
            json!(env!("CARGO_PKG_VERSION")),
            "{run}"
        );
        assert!(
            document["setup"]["command"].is_string(),
            "{run}: {}",
            document["setup"]
        );
    }
    assert!(cells.values().all(|v| v[0] == "pass"), "{cells:?}");
    assert!(cells.values().any(|v| v[1] == "fail"), "{cells:?}");
    assert!(cells.values().any(|v| v[1] == "pass"), "{cells:?}");
}

/// Writes `dir/results.json` as a run of an ad-hoc agent writes it: with what was run, what the
/// agent declared, how it authenticated and what discovery saw.
fn agent_results(dir: &Path, command: &str, version: &str, rows: Vec<Value>) {
    results(dir, "command-line", rows);
    let path = dir.join("results.json");
    let mut document: Value =
        serde_json::from_str(&std::fs::read_to_string(&path).expect("results.json")).expect("json");
    document["ski_version"] = json!("9.8.7");
    document["setup"] = json!({
        "command": command,
        "agent": { "name": "echo-agent", "title": "Echo Agent", "version": version },
        "auth": "chose method \"api-key\": its key ECHO_KEY is set",
        "discovered": ["agent", "session", "stdio"],
        "discovery_notes": [format!("initialize answered after 12 ms in {}", dir.display())],
    });
    std::fs::write(
        &path,
        serde_json::to_string_pretty(&document).expect("json"),
    )
    .expect("results.json is written");
}

/// The part of `html` from `start` to the next `end`.
fn between<'a>(html: &'a str, start: &str, end: &str) -> &'a str {
    html.split(start)
        .nth(1)
        .and_then(|s| s.split(end).next())
        .unwrap_or_else(|| panic!("no {start}"))
}

/// What makes a matrix publishable: each column names the command, the agent's declared name
/// and version, ski's version, the auth method and discovery's notes (two runs of one agent are
/// told apart); a legend; rows every target skipped folded into one line unless
/// `--show-skipped`; no local path (the working, home, build and temp directories are
/// placeholders); stderr only behind a link and capped; untested cells explained once per
/// reason.
#[tokio::test]
async fn a_published_matrix_names_each_target_folds_common_skips_and_leaks_no_local_path() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let home = dir.path().join("people/me");
    let local = dir.path().display().to_string();
    let command = format!(
        "{} --script {}/agent.toml",
        mock_agent().display(),
        home.display()
    );
    let flood: String = "e".repeat(3000);
    let mut stderr: Vec<Value> = (0..8)
        .map(|n| json!({ "channel": "agent/stderr", "direction": "in", "t": n, "text": format!("FIRST-STDERR-{n} {flood}") }))
        .collect();
    stderr.push(json!({ "channel": "agent/stderr", "direction": "in", "t": 9, "text": "LAST-STDERR panicked at src/main.rs" }));
    stderr.push(
        json!({ "channel": "agent", "direction": "in", "t": 9.5, "text": "{\"jsonrpc\":\"2.0\"}" }),
    );
    let untested = format!(
        "could not hold a turn: the agent left {}/.cache/x",
        home.display()
    );
    let rows = |version: &str| {
        vec![
            row("X-001", "pass", json!({})),
            row(
                "X-002",
                if version == "1.0.0" { "pass" } else { "fail" },
                json!({
                    "failure": { "check": "c", "expected": "e", "actual": format!("read /tmp/.tmpQz91ab/home/session.json and {local}/x") },
                    "wire": stderr.clone(),
                }),
            ),
            row("X-003", "skip", json!({ "message": "lacks ws" })),
            row(
                "X-004",
                "skip",
                json!({ "not_tested": true, "message": untested.clone() }),
            ),
            row(
                "X-005",
                "skip",
                json!({ "not_tested": true, "message": untested.clone() }),
            ),
        ]
    };
    agent_results(
        &dir.path().join("runs/old"),
        &command,
        "1.0.0",
        rows("1.0.0"),
    );
    agent_results(
        &dir.path().join("runs/new"),
        &command,
        "1.1.0",
        rows("1.1.0"),
    );
    let home_text = home.display().to_string();
    let env = [("HOME", home_text.as_str())];
    let run = support::ski_conformance_with_env(
        &[
            "matrix",
            "--from",
            "old=runs/old",
            "--from",
            "new=runs/new",
            "--out",
            "out",
        ],
        dir.path(),
        &env,
    )
    .await;
    assert_eq!(run.code, Some(1), "{}{}", run.stdout, run.stderr);
    let html = std::fs::read_to_string(dir.path().join("out/report.html")).expect("report.html");
    let md = std::fs::read_to_string(dir.path().join("out/matrix.md")).expect("matrix.md");
    assert_self_contained(&html);

    // Each column: the command, the agent's name and version, ski's version, auth, discovery.
    for page in [&html, &md] {
        assert!(
            page.contains("{target_dir}/debug/ski-mock-agent --script {home}/agent.toml"),
            "the command:\n{page}"
        );
        assert!(
            page.contains("echo-agent Echo Agent 1.0.0"),
            "the old agent's version"
        );
        assert!(
            page.contains("echo-agent Echo Agent 1.1.0"),
            "the new agent's version"
        );
        assert!(page.contains("9.8.7"), "ski's version");
        assert!(
            page.contains("chose method &quot;api-key&quot;")
                || page.contains("chose method \"api-key\""),
            "the auth method"
        );
        assert!(
            page.contains("initialize answered after 12 ms in {cwd}/runs/old"),
            "the discovery notes"
        );
        // The legend says what each verdict and qualifier means.
        for words in [
            "the target does not declare what the row requires",
            "failed first and passed only when re-run alone",
        ] {
            assert!(page.contains(words), "the legend lacks {words:?}");
        }
        // No local path: the working, home and temp directories are placeholders.
        assert!(!page.contains(&local), "a local path in:\n{page}");
        assert!(!page.contains("/tmp/"), "a temp path in:\n{page}");
        assert!(
            page.contains("{temp_dir}/home/session.json"),
            "the temp dir placeholder"
        );
    }
    // The untested rows are explained once per reason and target, naming the rows.
    assert_eq!(md.matches("could not hold a turn").count(), 2, "{md}");
    assert!(
        md.contains("new not tested (2 row(s): `X-004`, `X-005`)"),
        "{md}"
    );
    assert_eq!(
        html.matches("<pre>could not hold a turn").count(),
        2,
        "one section per reason"
    );
    assert!(
        html.contains("href=\"#n-1-0\""),
        "the untested cells link to their reason"
    );
    assert!(between(&html, "<dl id=\"legend\">", "</dl>").contains(">not tested</dt>"));

    // The row both targets skipped is folded away, named once; the others are rows.
    assert_eq!(
        cells(&html).keys().collect::<Vec<_>>(),
        ["X-001", "X-002", "X-004", "X-005"]
    );
    assert!(between(&html, "<p id=\"folded\">", "</p>").contains("X-003"));
    assert!(!md.contains("| acp | X-003 |"), "{md}");
    assert!(
        md.contains("--show-skipped` shows them as rows): `X-003`"),
        "{md}"
    );
    // The counts are the runs' own: the folded skip and the untested rows count as skipped.
    let counts = between(&html, "<tr id=\"t-1\">", "</tr>");
    let counts: Vec<&str> = counts
        .split("<td class=\"count\">")
        .skip(1)
        .filter_map(|c| c.split('<').next())
        .collect();
    assert_eq!(
        counts,
        ["1", "1", "0", "0", "3", "2", "0"],
        "new: pass fail error blocked skipped not-tested not-run"
    );

    // Stderr is not in the wire log but behind a link, capped to its last lines.
    let section = between(&html, "<section class=\"cell\" id=\"c-1-1\">", "</section>");
    assert!(!section.contains("STDERR"), "stderr inline:\n{section}");
    assert!(section.contains("href=\"#s-1-1\""), "{section}");
    assert!(
        section.contains("{&quot;jsonrpc&quot;"),
        "the agent's stdout stays: {section}"
    );
    let behind = between(
        &html,
        "<section class=\"stderr\" id=\"s-1-1\">",
        "</section>",
    );
    assert!(behind.contains("LAST-STDERR panicked"), "{behind}");
    assert!(
        !behind.contains("FIRST-STDERR-0"),
        "uncapped: {} bytes",
        behind.len()
    );
    assert!(behind.len() < 6 * 1024, "uncapped: {} bytes", behind.len());
    assert!(!md.contains("STDERR"), "stderr in matrix.md");

    // With --show-skipped the folded row is a row again.
    let run = support::ski_conformance_with_env(
        &[
            "matrix",
            "--from",
            "old=runs/old",
            "--from",
            "new=runs/new",
            "--show-skipped",
            "--out",
            "all",
        ],
        dir.path(),
        &env,
    )
    .await;
    assert_eq!(run.code, Some(1), "{}{}", run.stdout, run.stderr);
    let html = std::fs::read_to_string(dir.path().join("all/report.html")).expect("report.html");
    assert_self_contained(&html);
    assert_eq!(
        cells(&html).keys().collect::<Vec<_>>(),
        ["X-001", "X-002", "X-003", "X-004", "X-005"]
    );
    assert!(!html.contains("id=\"folded\""));
}

/// Labels that collide, and a target named by nothing but its label, are usage errors.
#[tokio::test]
async fn colliding_or_empty_targets_are_usage_errors() {
    let dir = tempfile::tempdir().expect("a temp dir");
    for (args, said) in [
        (
            &[
                "matrix",
                "--target",
                "a=reference",
                "--target",
                "a=reference",
            ][..],
            "two targets are labelled \"a\"",
        ),
        (
            &["matrix", "--agent-cmd", "a="][..],
            "nothing after the label",
        ),
        (&["matrix"][..], "no target"),
        (
            &["matrix", "--from", "a=missing"][..],
            "missing/results.json is not a file",
        ),
    ] {
        let run = ski_conformance(args, dir.path()).await;
        assert_eq!(run.code, Some(2), "{args:?}: {}{}", run.stdout, run.stderr);
        assert!(run.stderr.contains(said), "{args:?}: {}", run.stderr);
    }
}

/// The first of these on PATH.
fn headless_browser() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    [
        "chromium",
        "chromium-browser",
        "google-chrome",
        "google-chrome-stable",
        "chromium-headless-shell",
    ]
    .iter()
    .flat_map(|name| std::env::split_paths(&path).map(move |dir| dir.join(name)))
    .find(|candidate| candidate.is_file())
}

/// Where a headless Chromium is installed, the page renders and its script runs (it counts the
/// rows it shows); where none is, this says so and checks nothing more.
#[tokio::test]
async fn the_page_renders_in_a_headless_chromium_where_one_is_installed() {
    let Some(browser) = headless_browser() else {
        eprintln!(
            "skipped: no headless Chromium (chromium, chromium-browser, google-chrome, chromium-headless-shell) on PATH"
        );
        return;
    };
    let dir = tempfile::tempdir().expect("a temp dir");
    results(
        &dir.path().join("runs/one"),
        "one",
        vec![
            row("X-001", "pass", json!({})),
            row(
                "X-002",
                "fail",
                json!({ "failure": { "check": "c", "expected": "e", "actual": INJECTION } }),
            ),
        ],
    );
    let run = ski_conformance(
        &["matrix", "--from", "one=runs/one", "--out", "out"],
        dir.path(),
    )
    .await;
    assert_eq!(run.code, Some(1), "{}{}", run.stdout, run.stderr);
    let page = dir.path().join("out/report.html");
    let dom = dump_dom(&browser, &format!("file://{}", page.display()), dir.path()).await;
    assert!(
        dom.contains("2 of 2 rows shown"),
        "the script did not run:\n{dom}"
    );
    assert!(dom.contains("X-002"), "{dom}");
    assert!(!dom.contains("<img"), "{dom}");
    // The outcome filter, preset from the query, hides the row without a failing cell.
    let dom = dump_dom(
        &browser,
        &format!("file://{}?outcome=fail", page.display()),
        dir.path(),
    )
    .await;
    assert!(dom.contains("1 of 2 rows shown"), "{dom}");
    let hidden: Vec<&str> = dom
        .lines()
        .filter(|line| line.starts_with("<tr id=\"r-") && line.contains(" hidden=\""))
        .collect();
    assert_eq!(hidden.len(), 1, "{hidden:?}");
    assert!(hidden[0].contains("data-id=\"X-001\""), "{hidden:?}");
}

/// The DOM of `url` once its script ran, as a headless `browser` prints it.
async fn dump_dom(browser: &Path, url: &str, home: &Path) -> String {
    let mut child = ski::transport::child::spawn(
        ski::transport::child::ChildSpec::new("chromium", browser)
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--dump-dom",
                url,
            ])
            .env("HOME", home),
    )
    .expect("the browser starts");
    child.close_stdin();
    let mut dom = String::new();
    while let Some(line) = child.next_line().await.expect("the browser's output") {
        dom.push_str(&line);
        dom.push('\n');
    }
    let _ = child.shutdown().await;
    dom
}
