#!/usr/bin/env bash
# Installs Node @slack/web-api 8 and @slack/socket-mode 3 into $1/node_modules.
# Usage: install.sh DEST   then run: NODE_PATH=DEST/node_modules node scenario.mjs READY_JSON
set -euo pipefail
dest=${1:?usage: install.sh DEST}
mkdir -p "$dest"
cd "$dest"
if [ ! -d node_modules/@slack/socket-mode ] || [ ! -d node_modules/@slack/web-api ]; then
  npm install --silent --no-audit --no-fund '@slack/web-api@8.2.0' '@slack/socket-mode@3.1.0'
fi
