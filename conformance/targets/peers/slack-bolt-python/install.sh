#!/usr/bin/env bash
# Installs Bolt for Python (and the slack_sdk it runs on, with aiohttp for AsyncApp's Socket Mode
# handler) into a virtual environment at $1.
# Usage: install.sh DEST   then run: DEST/bin/python scenario.py [--socket-mode] READY_JSON
#                          or:       DEST/bin/python scenario_async.py READY_JSON
set -euo pipefail
dest=${1:?usage: install.sh DEST}
if [ ! -x "$dest/bin/python" ]; then
  python3 -m venv "$dest"
fi
if ! "$dest/bin/python" -c 'import slack_bolt, aiohttp' 2>/dev/null; then
  "$dest/bin/python" -m pip install --quiet 'slack_bolt==1.30.0' 'slack_sdk==3.47.0' 'aiohttp==3.12.15'
fi
