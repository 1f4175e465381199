#!/bin/sh
# Installs the TypeScript SDK client into DIR (default: target/peers/ts-sdk-client under the
# workspace): the client script and its package.json, which pins exact versions of the SDK and
# zod (its one peer dependency). mocks/tests/mock_agent_replay_clients.rs runs it against
# replayed recordings and the live agents they came from.
set -eu
exec sh "$(dirname "$0")/../npm-install.sh" ts-sdk-client "$@"
