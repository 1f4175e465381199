//! ski-mocks: fakes that stand in for real agents and for Slack in tests.
