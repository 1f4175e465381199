#!/bin/sh
# Installs acpx, a headless ACP client, into DIR (default: target/peers/acpx under the
# workspace), pinned to an exact version. mocks/tests/mock_agent_replay_clients.rs runs it as
# `node DIR/node_modules/acpx/dist/cli.js --agent CMD --format json exec PROMPT` against
# replayed recordings and the live agents they came from.
set -eu
exec sh "$(dirname "$0")/../npm-install.sh" acpx "$@"
