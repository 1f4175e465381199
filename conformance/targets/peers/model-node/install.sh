#!/usr/bin/env bash
# Installs the official Node clients `openai` and `@anthropic-ai/sdk` into $1/node_modules, for
# the fake model provider's peer tests.
# Usage: install.sh DEST   then run: NODE_PATH=DEST/node_modules node scenario.cjs READY_JSON
set -euo pipefail
dest=${1:?usage: install.sh DEST}
mkdir -p "$dest"
cd "$dest"
if [ ! -d node_modules/openai ] || [ ! -d node_modules/@anthropic-ai/sdk ]; then
  npm install --silent --no-audit --no-fund 'openai@7.60.0' '@anthropic-ai/sdk@1.17.0'
fi
