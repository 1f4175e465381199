//! Failures the runner must not charge to a real agent, and failures it must charge at once, read
//! from `results.json` (never from the clock). The stand-ins are shell scripts that behave as real
//! agents do offline; the main one as Gemini CLI does: it answers `initialize`, refuses
//! `session/new` with -32000 until authenticated, answers every other request with -32601, and
//! says nothing to a batch, a malformed line or a JSON value that is no request.

use crate::acp_rows;

use std::path::{Path, PathBuf};

use acp_rows::{row, run_against, run_discovered, run_with};

/// Writes a shell-script agent to `dir/name`: each request line goes to the first of `cases` (shell
/// `case` branches, `$id` is the request's id) that matches, every other request answers -32601;
/// `after` runs once its stdin has ended.
fn script_agent(dir: &Path, name: &str, cases: &str, after: &str) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let path = dir.join(name);
    let body = format!(
        r#"#!/bin/sh
id_of() {{ printf '%s' "$1" | sed -n 's/^{{"jsonrpc":"2.0","id":\("[^"]*"\|[0-9]*\),.*/\1/p'; }}
while read -r line; do
  id=$(id_of "$line")
  case "$line" in
{cases}
    '{{"jsonrpc":"2.0","id":'*'"method":"'*)
      printf '{{"jsonrpc":"2.0","id":%s,"error":{{"code":-32601,"message":"Method not found"}}}}\n' "$id"
      ;;
  esac
done
{after}
"#
    );
    std::fs::write(&path, body).expect("the script is written");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    path
}

/// Writes the stand-in of the module docs.
fn auth_gated_agent(dir: &Path) -> PathBuf {
    let cases = r#"    '['*) ;;
    *'"method":"initialize"'*)
      printf '{"jsonrpc":"2.0","id":%s,"result":{"protocolVersion":1,"agentCapabilities":{},"authMethods":[{"id":"login","name":"Log in with a browser"}]}}\n' "$id"
      ;;
    *'"method":"session/new"'*)
      printf '{"jsonrpc":"2.0","id":%s,"error":{"code":-32000,"message":"API key is missing"}}\n' "$id"
      ;;"#;
    script_agent(dir, "agent.sh", cases, "")
}

/// Writes an agent that answers `initialize` and `session/new` and every other request with
/// -32601, never answers `session/prompt` (offline, its model is out of reach), and stays alive
/// after its stdin ends (it never exits by itself).
fn lingering_agent(dir: &Path) -> PathBuf {
    let cases = r#"    *'"method":"initialize"'*)
      printf '{"jsonrpc":"2.0","id":%s,"result":{"protocolVersion":1,"agentCapabilities":{},"authMethods":[]}}\n' "$id"
      ;;
    *'"method":"session/new"'*)
      printf '{"jsonrpc":"2.0","id":%s,"result":{"sessionId":"s-1"}}\n' "$id"
      ;;
    *'"method":"session/prompt"'*) ;;"#;
    script_agent(dir, "lingering.sh", cases, "exec sleep 600")
}

/// Writes an agent that behaves as the Claude Code ACP adapter does offline when run as root: it
/// advertises `session/list` and answers every `session/new` with -32603 "Query closed before
/// response received" (the adapter's engine refused to start, reported as an internal error).
fn session_refusing_agent(dir: &Path) -> PathBuf {
    let cases = r#"    *'"method":"initialize"'*)
      printf '{"jsonrpc":"2.0","id":%s,"result":{"protocolVersion":1,"agentCapabilities":{"sessionCapabilities":{"list":{}}},"authMethods":[]}}\n' "$id"
      ;;
    *'"method":"session/new"'*)
      printf '{"jsonrpc":"2.0","id":%s,"error":{"code":-32603,"message":"Internal error","data":{"details":"Query closed before response received"}}}\n' "$id"
      ;;"#;
    script_agent(dir, "refusing.sh", cases, "")
}

#[tokio::test]
async fn a_session_refused_where_discovery_could_open_none_blocks_the_row_whatever_the_code() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let agent = session_refusing_agent(dir.path());
    // Discovery finds session/list but no session, so WS-050 (a capability row of session/list)
    // runs, and the session/new it needs is refused as discovery's was.
    let results = run_discovered(&agent, &["WS-050"], dir.path()).await;
    let listed = row(&results, "WS-050");
    assert_eq!(listed["outcome"], "blocked", "{listed:#}");
    assert!(
        listed["message"]
            .as_str()
            .is_some_and(|m| m.contains("Query closed before response received")),
        "{listed:#}"
    );
}

#[tokio::test]
async fn a_session_refused_for_authentication_blocks_the_rows_that_need_it() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let agent = auth_gated_agent(dir.path());
    // ACP-CORE-021 judges how session/new answers missing params: an agent that asks for
    // authentication before it looks at them (Copilot CLI) shows nothing of that.
    let ids = ["ACP-CORE-004", "ACP-CORE-020", "ACP-CORE-021"];
    let results = run_against(&agent, &ids, dir.path()).await;
    for id in ids {
        let result = row(&results, id);
        assert_eq!(result["outcome"], "blocked", "{result:#}");
        assert!(
            result["message"]
                .as_str()
                .is_some_and(|m| m.contains("authentication required")),
            "{result:#}"
        );
    }
}

#[tokio::test]
async fn framing_rows_judge_an_auth_gated_agent_by_any_answer() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let agent = auth_gated_agent(dir.path());
    // ACP-CORE-007 (an unknown notification is ignored) and ACP-CORE-019 (a request written in
    // pieces, two requests in one write) judge framing: the agent's -32000 to session/new is an
    // answer to a request it read whole.
    let ids = ["ACP-CORE-007", "ACP-CORE-019"];
    let results = run_against(&agent, &ids, dir.path()).await;
    for id in ids {
        let result = row(&results, id);
        assert_eq!(result["outcome"], "pass", "{result:#}");
    }
    // The fragmented initialize is a set-up step: it is waited for with the set-up allowance,
    // not the row's short timeout class, and the two session/new of one write are two more.
    let fragmented = row(&results, "ACP-CORE-019");
    assert_eq!(fragmented["setup_steps"], 3, "{fragmented:#}");
}

#[tokio::test]
async fn an_error_the_agent_skipped_fails_once_when_it_answered_the_next_request() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let agent = auth_gated_agent(dir.path());
    let ids = ["ACP-CORE-014", "ACP-CORE-016", "ACP-CORE-017"];
    let results = run_against(&agent, &ids, dir.path()).await;
    // ACP v1 has no batches: a batch left unanswered by an agent that keeps serving passes
    // (E-ACP-53), and at once, without waiting out its class.
    let batch = row(&results, "ACP-CORE-014");
    assert_eq!(batch["outcome"], "pass", "{batch:#}");
    assert_eq!(batch["attempts"], 1, "{batch:#}");
    for id in ["ACP-CORE-016", "ACP-CORE-017"] {
        let result = row(&results, id);
        assert_eq!(result["outcome"], "fail", "{result:#}");
        // The agent answered the request sent right after the message and never the message:
        // a definite answer, not a wait that ran out, so the row is neither re-run nor waited out.
        assert!(
            result["failure"].get("deadline_passed").is_none(),
            "{result:#}"
        );
        assert_eq!(result["attempts"], 1, "{result:#}");
        assert!(
            result["failure"]["actual"]
                .as_str()
                .is_some_and(|a| a.contains("answered the request sent after it")),
            "{result:#}"
        );
    }
}

#[tokio::test]
async fn an_agent_that_does_not_exit_at_eof_fails_one_short_wait_and_blocks_what_needs_the_exit() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let agent = lingering_agent(dir.path());
    let results = run_against(&agent, &["ACP-CORE-008", "ACP-CORE-009"], dir.path()).await;
    // ACP-CORE-008 judges the exit: it waits 5 s (1 s at a fifth), not its class (normal, 20 s).
    let exit = row(&results, "ACP-CORE-008");
    assert_eq!(exit["outcome"], "fail", "{exit:#}");
    assert_eq!(
        exit["failure"]["expected"], "the agent exits after its stdin is closed within 1s",
        "{exit:#}"
    );
    // ACP-CORE-009 judges what outlives the agent, which an agent that never exits does not show.
    let group = row(&results, "ACP-CORE-009");
    assert_eq!(group["outcome"], "blocked", "{group:#}");
    assert!(
        group["message"]
            .as_str()
            .is_some_and(|m| m.contains("did not exit")),
        "{group:#}"
    );
}

#[tokio::test]
async fn a_turn_that_never_ends_where_discovery_saw_none_end_is_not_a_failure() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let agent = lingering_agent(dir.path());
    // Without `prompt` declared, ACP-CORE-045 still runs a turn to judge a stop reason outside
    // the schema; a turn that is never answered shows no stop reason to judge.
    let results = run_against(&agent, &["ACP-CORE-045"], dir.path()).await;
    let result = row(&results, "ACP-CORE-045");
    assert_eq!(result["outcome"], "skip", "{result:#}");
    assert_eq!(result["attempts"], 1, "{result:#}");
}

/// Writes an agent that advertises an auth method, answers `initialize`, its first `session/new`
/// and every other request (an error), and never a second `session/new` (one that, offline, takes
/// longer than a row's short class).
fn one_session_agent(dir: &Path) -> PathBuf {
    let cases = r#"    *'"method":"initialize"'*)
      printf '{"jsonrpc":"2.0","id":%s,"result":{"protocolVersion":1,"agentCapabilities":{},"authMethods":[{"id":"api-key","name":"API key"}]}}\n' "$id"
      ;;
    *'"method":"session/new"'*)
      if [ -z "$opened" ]; then
        opened=1
        printf '{"jsonrpc":"2.0","id":%s,"result":{"sessionId":"s-1"}}\n' "$id"
      fi
      ;;"#;
    script_agent(dir, "one-session.sh", cases, "")
}

#[tokio::test]
async fn a_refused_authenticate_is_followed_by_any_request_not_a_session() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let agent = one_session_agent(dir.path());
    // ACP-CAP-007 proves the agent still serves after it refused an unknown auth method: any
    // answer to any request does, not a second session the agent is slow to open.
    let results = run_against(&agent, &["ACP-CAP-007"], dir.path()).await;
    let result = row(&results, "ACP-CAP-007");
    assert_eq!(result["outcome"], "pass", "{result:#}");
}

/// Writes an agent that refuses `session/new` with -32000 until the connection called
/// `authenticate` with its one method, `api-key`.
fn key_gated_agent(dir: &Path) -> PathBuf {
    let cases = r#"    *'"method":"initialize"'*)
      printf '{"jsonrpc":"2.0","id":%s,"result":{"protocolVersion":1,"agentCapabilities":{},"authMethods":[{"id":"api-key","name":"API key"}]}}\n' "$id"
      ;;
    *'"method":"authenticate"'*'"methodId":"api-key"'*)
      authenticated=1
      printf '{"jsonrpc":"2.0","id":%s,"result":{}}\n' "$id"
      ;;
    *'"method":"session/new"'*)
      if [ -n "$authenticated" ]; then
        printf '{"jsonrpc":"2.0","id":%s,"result":{"sessionId":"s-1"}}\n' "$id"
      else
        printf '{"jsonrpc":"2.0","id":%s,"error":{"code":-32000,"message":"Authentication required"}}\n' "$id"
      fi
      ;;"#;
    script_agent(dir, "key-gated.sh", cases, "")
}

#[tokio::test]
async fn every_connection_to_the_agent_authenticates_and_none_to_ski_s_own_stand_in() {
    let dir = tempfile::tempdir().expect("a temp dir");
    let agent = key_gated_agent(dir.path());
    let options = [
        "--no-discover",
        "--capability",
        "agent",
        "--capability",
        "session",
        "--auth-method",
        "api-key",
    ];
    // ACP-CORE-020 sends its own initialize (with _meta); WS-063b and WS-064b judge the runner
    // on ski's own WebSocket server, which knows nothing of the agent's auth method.
    let ids = ["ACP-CORE-020", "WS-063b", "WS-064b"];
    let results = run_with(&agent, &options, &ids, dir.path()).await;
    for id in ids {
        let result = row(&results, id);
        assert_eq!(result["outcome"], "pass", "{result:#}");
    }
}

/// Writes an agent whose turns need a model, as a real agent's do: it answers `initialize` and
/// `session/new`, and for `session/prompt` asks the OpenAI Chat Completions API at
/// `$OPENAI_BASE_URL` with `$OPENAI_API_KEY`, sends the answer's text as an
/// `agent_message_chunk` and ends the turn `end_turn`. Without a model it never answers the
/// prompt (its request fails, as offline, and the turn waits on). After the answer it sends an
/// update of the kind in `$AFTER_ANSWER`, if set.
fn model_agent(dir: &Path) -> PathBuf {
    let path = dir.join("model_agent.py");
    let body = r#"import json, os, sys, urllib.request
def send(message):
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()
def ask(text):
    body = json.dumps({"model": "m", "messages": [{"role": "user", "content": text}]}).encode()
    request = urllib.request.Request(os.environ["OPENAI_BASE_URL"] + "/chat/completions", body,
        {"Content-Type": "application/json", "Authorization": "Bearer " + os.environ["OPENAI_API_KEY"]})
    with urllib.request.urlopen(request, timeout=30) as answer:
        return json.load(answer)["choices"][0]["message"]["content"]
for line in sys.stdin:
    try:
        message = json.loads(line)
    except ValueError:
        continue
    if not isinstance(message, dict) or "id" not in message or "method" not in message:
        continue
    method, id = message["method"], message["id"]
    if method == "initialize":
        send({"jsonrpc": "2.0", "id": id, "result": {"protocolVersion": 1, "agentCapabilities": {}, "authMethods": []}})
    elif method == "session/new":
        send({"jsonrpc": "2.0", "id": id, "result": {"sessionId": "s-1"}})
    elif method == "session/prompt":
        try:
            text = ask(message["params"]["prompt"][0].get("text", ""))
        except Exception:
            continue
        send({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "s-1",
              "update": {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text}}}})
        send({"jsonrpc": "2.0", "id": id, "result": {"stopReason": "end_turn"}})
        after = os.environ.get("AFTER_ANSWER")
        if after == "available_commands_update":
            send({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "s-1",
                  "update": {"sessionUpdate": after, "availableCommands": []}}})
        elif after:
            send({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "s-1",
                  "update": {"sessionUpdate": after, "content": {"type": "text", "text": "late"}}}})
    else:
        send({"jsonrpc": "2.0", "id": id, "error": {"code": -32601, "message": "Method not found"}})
"#;
    std::fs::write(&path, body).expect("the agent is written");
    path
}

/// A profile of [`model_agent`]: declared agent, session and stdio and `more`; with `model`, the
/// fake model section that points it at the runner's fake model through its own variables.
fn model_agent_profile(dir: &Path, model: bool, more: &[&str]) -> PathBuf {
    model_agent_profile_after(dir, model, more, "")
}

/// [`model_agent_profile`] whose agent sends an update of kind `after` after each answer.
fn model_agent_profile_after(dir: &Path, model: bool, more: &[&str], after: &str) -> PathBuf {
    let agent = model_agent(dir);
    let declared: Vec<String> = ["agent", "session", "stdio"]
        .iter()
        .chain(more)
        .map(|c| format!("{c:?}"))
        .collect();
    let mut text = format!(
        "name = \"model-agent\"\n[suites.acp]\ncapabilities = [{}]\n\
         env = {{ HOME = \"{{home}}\", AFTER_ANSWER = \"{after}\" }}\n\
         [suites.acp.commands]\nagent = \"python3 {}\"\n",
        declared.join(", "),
        agent.display()
    );
    if model {
        text.push_str(
            "[suites.acp.model]\napi = \"openai-chat\"\n\
             env = { OPENAI_BASE_URL = \"{model_openai_url}\", OPENAI_API_KEY = \"{model_key}\" }\n",
        );
    }
    let path = dir.join("model-agent.toml");
    std::fs::write(&path, text).expect("the profile is written");
    path
}

/// Runs `ids` against the profile at `profile`; results.json.
async fn run_profile(profile: &Path, ids: &[&str], dir: &Path) -> serde_json::Value {
    let profile = profile.display().to_string();
    let mut args = vec![
        "run",
        "--target",
        &profile,
        "--suite",
        "acp",
        "--jobs",
        "1",
        "--timeout-multiplier",
        "0.2",
        "--no-rerun",
        "--out",
        "out",
    ];
    for id in ids {
        args.extend(["--id", id]);
    }
    let run = crate::support::ski_conformance(&args, dir).await;
    let text = std::fs::read_to_string(dir.join("out/results.json")).unwrap_or_else(|e| {
        panic!(
            "no results.json ({e}), exit {:?}:\n{}{}",
            run.code, run.stdout, run.stderr
        )
    });
    serde_json::from_str(&text).expect("results.json is JSON")
}

#[tokio::test]
async fn a_fake_model_in_the_profile_lets_a_turn_row_run_that_was_not_tested() {
    let dir = tempfile::tempdir().expect("a temp dir");
    // No model: no turn ends, the row is not tested.
    let without = model_agent_profile(dir.path(), false, &[]);
    let results = run_profile(&without, &["ACP-CORE-003"], dir.path()).await;
    assert_eq!(
        row(&results, "ACP-CORE-003")["outcome"],
        "skip",
        "{results:#}"
    );
    assert_eq!(
        results["not_tested"],
        serde_json::json!(["ACP-CORE-003"]),
        "{results:#}"
    );

    // The model section: the runner starts the fake model, the agent's turn ends, the row runs.
    let with = model_agent_profile(dir.path(), true, &[]);
    let results = run_profile(&with, &["ACP-CORE-003"], dir.path()).await;
    let result = row(&results, "ACP-CORE-003");
    assert_eq!(result["outcome"], "pass", "{result:#}");
    assert_eq!(results["not_tested"], serde_json::json!([]), "{results:#}");

    // `prompt` declared with no model started: the turn never ends and the row fails.
    let declared = model_agent_profile(dir.path(), false, &["prompt"]);
    let results = run_profile(&declared, &["ACP-CORE-003"], dir.path()).await;
    let result = row(&results, "ACP-CORE-003");
    assert_eq!(result["outcome"], "fail", "{result:#}");
}

#[tokio::test]
async fn the_session_s_commands_after_a_turn_s_answer_are_not_a_late_turn_update() {
    let dir = tempfile::tempdir().expect("a temp dir");
    // Opencode and Qwen Code send available_commands_update whenever; ACP puts it in no turn.
    let commands = model_agent_profile_after(dir.path(), true, &[], "available_commands_update");
    let results = run_profile(&commands, &["ACP-CORE-003"], dir.path()).await;
    let result = row(&results, "ACP-CORE-003");
    assert_eq!(result["outcome"], "pass", "{result:#}");
    // A chunk of the turn after its answer still fails the row.
    let chunk = model_agent_profile_after(dir.path(), true, &[], "agent_message_chunk");
    let results = run_profile(&chunk, &["ACP-CORE-003"], dir.path()).await;
    let result = row(&results, "ACP-CORE-003");
    assert_eq!(result["outcome"], "fail", "{result:#}");
}

/// Writes an agent that advertises `session/list` and `session/delete` and keeps its session out
/// of `session/list` until the list has been asked for once (as Claude Agent ACP lists a session
/// only once its transcript is written, about a second after the turn's answer); a delete of a
/// session not yet listed answers -32603 "not found". With `refuses`, a delete of a listed session
/// is refused too.
fn late_listing_agent(dir: &Path, refuses: bool) -> PathBuf {
    let delete = if refuses {
        r#"printf '{"jsonrpc":"2.0","id":%s,"error":{"code":-32603,"message":"Internal error"}}\n' "$id""#
    } else {
        r#"deleted=1; printf '{"jsonrpc":"2.0","id":%s,"result":{}}\n' "$id""#
    };
    let cases = format!(
        r#"    *'"method":"initialize"'*)
      printf '{{"jsonrpc":"2.0","id":%s,"result":{{"protocolVersion":1,"agentCapabilities":{{"sessionCapabilities":{{"list":{{}},"delete":{{}}}}}},"authMethods":[]}}}}\n' "$id"
      ;;
    *'"method":"session/new"'*)
      printf '{{"jsonrpc":"2.0","id":%s,"result":{{"sessionId":"s-1"}}}}\n' "$id"
      ;;
    *'"method":"session/list"'*)
      if [ -n "$asked" ] && [ -z "$deleted" ]; then
        printf '{{"jsonrpc":"2.0","id":%s,"result":{{"sessions":[{{"sessionId":"s-1","cwd":"/"}}]}}}}\n' "$id"
      else
        printf '{{"jsonrpc":"2.0","id":%s,"result":{{"sessions":[]}}}}\n' "$id"
      fi
      asked=1
      ;;
    *'"method":"session/delete"'*)
      if [ -z "$asked" ]; then
        printf '{{"jsonrpc":"2.0","id":%s,"error":{{"code":-32603,"message":"Session s-1 not found"}}}}\n' "$id"
      else
        {delete}
      fi
      ;;"#
    );
    script_agent(dir, "late-listing.sh", &cases, "")
}

#[tokio::test]
async fn a_session_is_deleted_once_session_list_names_it() {
    let dir = tempfile::tempdir().expect("a temp dir");
    // ACP deletes a session from session/list and does not say how soon a session is listed.
    let agent = late_listing_agent(dir.path(), false);
    let results = run_against(&agent, &["ACP-CAP-004"], dir.path()).await;
    let result = row(&results, "ACP-CAP-004");
    assert_eq!(result["outcome"], "pass", "{result:#}");
    // A listed session whose delete is refused still fails the row.
    let agent = late_listing_agent(dir.path(), true);
    let results = run_against(&agent, &["ACP-CAP-004"], dir.path()).await;
    let result = row(&results, "ACP-CAP-004");
    assert_eq!(result["outcome"], "fail", "{result:#}");
}
