#!/bin/sh
# Installs the Claude Code ACP adapter 0.14.0, an older release than the claude-code-acp peer,
# into DIR (default: target/peers/claude-code-acp-0.14.0 under the workspace), without its install
# scripts. mocks/tests/mock_agent_record_drift.rs checks that `ski-mock-agent diff` reports how it
# differs from golden/recordings/claude-code-acp-initialize.toml, recorded from 0.16.2.
set -eu
NPM_FLAGS=--ignore-scripts exec sh "$(dirname "$0")/../npm-install.sh" claude-code-acp-0.14.0 "$@"
