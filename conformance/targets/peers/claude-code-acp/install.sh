#!/bin/sh
# Installs the Claude Code ACP adapter (@zed-industries/claude-code-acp) into DIR (default:
# target/peers/claude-code-acp under the workspace) with the version pinned in package.json. The profile
# conformance/targets/claude-code-acp.toml runs it from there, without credentials or a model.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../../.." && pwd)
dir=${1:-"${CARGO_TARGET_DIR:-$root/target}/peers/claude-code-acp"}
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
    echo "node and npm are needed for claude-code-acp; install Node.js 20 or later" >&2
    exit 1
fi
mkdir -p "$dir"
cp "$here/package.json" "$dir/"
cd "$dir"
npm install --ignore-scripts --no-audit --no-fund --loglevel=error
echo "installed claude-code-acp in $dir"
