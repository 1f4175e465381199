#!/bin/sh
# Installs Gemini CLI (@google/gemini-cli) into DIR (default:
# target/peers/gemini-cli under the workspace) with the version pinned in package.json. The profile
# conformance/targets/gemini-cli.toml runs it from there, without credentials or a model.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../../.." && pwd)
dir=${1:-"${CARGO_TARGET_DIR:-$root/target}/peers/gemini-cli"}
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
    echo "node and npm are needed for gemini-cli; install Node.js 20 or later" >&2
    exit 1
fi
mkdir -p "$dir"
cp "$here/package.json" "$dir/"
cd "$dir"
npm install --no-audit --no-fund --loglevel=error
echo "installed gemini-cli in $dir"
