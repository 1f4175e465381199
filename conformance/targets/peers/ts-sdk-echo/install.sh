#!/bin/sh
# Installs the TypeScript SDK echo agent into DIR (default: target/peers/ts-sdk-echo under the
# workspace): the agent and its package.json, which pins exact versions of the SDK, zod (its one
# peer dependency) and ws (the WebSocket server the SDK's experimental Node adapter needs). The
# profile conformance/targets/ts-sdk-echo.toml runs it from there.
set -eu
exec sh "$(dirname "$0")/../npm-install.sh" ts-sdk-echo "$@"
