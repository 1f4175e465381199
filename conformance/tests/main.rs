//! The integration tests of `ski-conformance` that use the standard test harness, one program:
//! each of these files of `tests/` is a module, and the support modules (`tests/support/`) are
//! declared here once and reached as `crate::<module>`. The trials of the defect corpora, the
//! reference run and the stand-ins are the other program, `tests/trials.rs` (libtest-mimic).

// Support shared by several files.
#[path = "support/acp_rows.rs"]
mod acp_rows;
#[path = "support/binaries.rs"]
mod binaries;
// The corpus's HTTP front, started in-process by `acp_remote_rows` (its command-line entry is
// the trials program's).
#[allow(dead_code)]
mod corpus_http_front;
#[path = "support/one_row.rs"]
mod one_row;
#[path = "support/peer_install.rs"]
mod peer_install;
#[path = "support/results.rs"]
mod results;
mod support;

// One module per test file.
mod acp_client_competence;
mod acp_https;
mod acp_remote_rows;
mod acp_shared_server;
mod catalog;
mod cli;
mod engine;
mod intercom_rows;
mod intercom_slack_hosts;
mod interrupted_run;
mod matrix;
mod mistakes;
mod mock_agent_replay_verdicts;
mod peers;
mod placed_files;
mod reports;
mod runner_bounds;
mod runner_honest_failures;
mod runner_timing;
mod verdicts;
