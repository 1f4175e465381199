//! The integration tests of `ski`, one program: each file of `tests/` is a module of it, and the
//! support code those files share (`tests/*_support/`, `tests/ledger_history/`) is declared here
//! once and reached as `crate::<module>`. One program links ski once instead of once per file;
//! `cargo test -p ski --test main <module>::` runs one file's tests.

// Support shared by several files.
mod acp_agent_support;
mod acp_backpressure_support;
mod acp_serve_support;
mod aof_support;
mod intercom_support;
mod jsonrpc_support;
mod ledger_history;
mod teams_support;

// One module per test file.
mod acp_agent_schema;
mod acp_agent_sessions;
mod acp_agent_turns;
mod acp_agent_ws;
mod acp_cli_client;
mod acp_cli_serve;
mod acp_client_backpressure;
mod acp_client_driver;
mod acp_client_flood;
mod acp_client_fs_links;
mod acp_client_reconnect;
mod acp_client_runtime;
mod acp_client_ws;
mod acp_golden;
mod acp_http_interop;
mod acp_https;
mod acp_remote;
mod acp_serve_backpressure;
mod acp_serve_sessions;
mod acp_serve_ws_limits;
mod acp_serve_ws_oversize;
mod acp_v1_additions;
mod acp_v2;
mod acp_v2_interop;
mod aof_data_safety;
mod aof_golden;
mod aof_model;
mod aof_properties;
mod aof_reliability;
mod aof_scenarios;
mod aof_summary_links;
mod cli_closed_stdout;
mod cli_help;
mod intercom_acp;
mod intercom_cli;
mod intercom_escaping;
mod intercom_golden;
mod intercom_hardening;
mod intercom_links;
mod intercom_mcp;
mod intercom_mcp_limits;
mod intercom_mcp_security;
mod intercom_store_foreign;
mod intercom_warnings;
mod jsonrpc_dispatch;
mod jsonrpc_framing;
mod jsonrpc_number_ids;
mod jsonrpc_peer;
mod jsonrpc_transport;
mod kiro_backpressure;
mod kiro_env_file;
mod kiro_environment;
mod kiro_golden;
mod kiro_provision_files;
mod ledger_kill_harness;
mod storage_inside_root;
mod teams_concurrency;
mod teams_data_safety;
mod teams_foreign_ledger;
mod teams_golden;
mod teams_hostile;
mod teams_model;
