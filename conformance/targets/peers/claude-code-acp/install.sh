#!/bin/sh
# Installs the Claude Code ACP adapter (@zed-industries/claude-code-acp, pinned in package.json)
# into DIR (default: target/peers/claude-code-acp under the workspace). The profile
# conformance/targets/claude-code-acp.toml runs it from there, without credentials or a model.
# Its install scripts are not run: the adapter needs none of them offline.
set -eu
NPM_FLAGS=--ignore-scripts exec sh "$(dirname "$0")/../npm-install.sh" claude-code-acp "$@"
