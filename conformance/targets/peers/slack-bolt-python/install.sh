#!/usr/bin/env bash
# Installs Bolt for Python (and the slack_sdk it runs on) into a virtual environment at $1.
# Usage: install.sh DEST   then run: DEST/bin/python scenario.py READY_JSON
set -euo pipefail
dest=${1:?usage: install.sh DEST}
if [ ! -x "$dest/bin/python" ]; then
  python3 -m venv "$dest"
fi
if ! "$dest/bin/python" -c 'import slack_bolt' 2>/dev/null; then
  "$dest/bin/python" -m pip install --quiet 'slack_bolt==1.30.0' 'slack_sdk==3.47.0'
fi
