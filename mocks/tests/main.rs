//! The integration tests of `ski-mocks`, one program: each file of `tests/` is a module of it,
//! and the support code those files share (`tests/*_support/`) is declared here once and reached
//! as `crate::<module>`. `cargo test -p ski-mocks --test main <module>::` runs one file's tests.

// Support shared by several files.
mod agent_support;
mod model_support;
mod peer_support;
mod slack_support;

// One module per test file.
mod agent_cli;
mod agent_commands;
mod agent_faults;
mod agent_hostile;
mod agent_in_process;
mod agent_input_ends;
mod agent_personalities;
mod agent_readme;
mod agent_remote;
mod agent_transcript_control;
mod agent_v2;
mod cli_closed_stdout;
mod kiro_client;
mod kiro_sessions;
mod mock_agent_record;
mod mock_agent_record_diff;
mod mock_agent_record_drift;
mod mock_agent_record_golden;
mod mock_agent_record_profiles;
mod mock_agent_record_replay;
mod mock_agent_record_ws;
mod mock_agent_replay_clients;
mod model_cli;
mod model_peers;
mod model_wire;
mod slack_auth;
mod slack_cli;
mod slack_control_limits;
mod slack_fidelity;
mod slack_fidelity_gaps;
mod slack_golden;
mod slack_http_events;
mod slack_http_peers;
mod slack_listener_limits;
mod slack_methods;
mod slack_peers;
mod slack_readme;
mod slack_retention;
mod slack_socket_mode;
mod slack_tls;
mod slack_web_api;
mod slack_wiremock;
