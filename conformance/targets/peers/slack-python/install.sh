#!/usr/bin/env bash
# Installs Python slack_sdk, with aiohttp for its asyncio clients, into a virtual environment at
# $1 (created if missing).
# Usage: install.sh DEST   then run: DEST/bin/python scenario.py READY_JSON
#                          or:       DEST/bin/python scenario_aiohttp.py READY_JSON
set -euo pipefail
dest=${1:?usage: install.sh DEST}
if [ ! -x "$dest/bin/python" ]; then
  python3 -m venv "$dest"
fi
if ! "$dest/bin/python" -c 'import slack_sdk, aiohttp' 2>/dev/null; then
  "$dest/bin/python" -m pip install --quiet 'slack_sdk==3.47.0' 'aiohttp==3.12.15'
fi
