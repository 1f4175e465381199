#!/usr/bin/env bash
# Installs the previous major lines, Node @slack/web-api 7 and @slack/socket-mode 2, into
# $1/node_modules, for the same scenario as slack-node (../slack-node/scenario.cjs).
# Usage: install.sh DEST   then run: NODE_PATH=DEST/node_modules node ../slack-node/scenario.cjs READY_JSON
set -euo pipefail
dest=${1:?usage: install.sh DEST}
mkdir -p "$dest"
cd "$dest"
if [ ! -d node_modules/@slack/socket-mode ] || [ ! -d node_modules/@slack/web-api ]; then
  npm install --silent --no-audit --no-fund '@slack/web-api@7.9.3' '@slack/socket-mode@2.0.7'
fi
