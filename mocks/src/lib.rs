//! ski-mocks: fakes that stand in for real agents and for Slack in tests.
//!
//! - [`agent`]: `ski-mock-agent`, a scriptable fake agent process, and its interpreter.

pub mod agent;
