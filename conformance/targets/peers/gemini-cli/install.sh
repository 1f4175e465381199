#!/bin/sh
# Installs Gemini CLI (@google/gemini-cli, pinned in package.json) into DIR (default:
# target/peers/gemini-cli under the workspace). The profile conformance/targets/gemini-cli.toml
# runs it from there (`gemini --acp`), without credentials or a model.
set -eu
exec sh "$(dirname "$0")/../npm-install.sh" gemini-cli "$@"
