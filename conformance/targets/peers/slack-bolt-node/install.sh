#!/usr/bin/env bash
# Installs Bolt for JavaScript (@slack/bolt 5, on @slack/web-api) into $1/node_modules.
# Usage: install.sh DEST   then run: NODE_PATH=DEST/node_modules node scenario.cjs READY_JSON
set -euo pipefail
dest=${1:?usage: install.sh DEST}
mkdir -p "$dest"
cd "$dest"
if [ ! -d node_modules/@slack/bolt ]; then
  npm install --silent --no-audit --no-fund '@slack/bolt@5.1.0'
fi
