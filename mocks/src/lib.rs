//! ski-mocks: fakes that stand in for real agents and for Slack in tests.
//!
//! - [`agent`]: `ski-mock-agent`, a scriptable fake agent process, and its interpreter.
//! - [`model`]: `ski-fake-model`, a fake OpenAI and Anthropic model provider.
//! - [`slack`]: `ski-fake-slack`, a fake Slack (Web API, Socket Mode, control API).
//! - [`testing`]: test support shared by ski's integration tests and the conformance suites.

pub mod agent;
pub mod model;
pub mod slack;
pub mod testing;
