#!/bin/sh
# Installs the TypeScript SDK echo agent into DIR (default: target/peers/ts-sdk-echo under the
# workspace): copies the agent and its package.json there and runs `npm install` with the pinned
# versions. The profile conformance/targets/ts-sdk-echo.toml runs it from there.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../../.." && pwd)
dir=${1:-"${CARGO_TARGET_DIR:-$root/target}/peers/ts-sdk-echo"}
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
    echo "node and npm are needed for the TypeScript SDK echo agent; install Node.js 18 or later" >&2
    exit 1
fi
mkdir -p "$dir"
cp "$here/package.json" "$here/echo-agent.mjs" "$dir/"
cd "$dir"
# package.json pins exact versions of the SDK, zod (its one peer dependency) and ws (the
# WebSocket server the SDK's experimental Node adapter needs).
npm install --no-audit --no-fund --loglevel=error
echo "installed the TypeScript SDK echo agent in $dir"
