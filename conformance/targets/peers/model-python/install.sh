#!/usr/bin/env bash
# Installs the official Python clients `openai` and `anthropic` into a virtual environment at $1
# (created if missing), for the fake model provider's peer tests.
# Usage: install.sh DEST   then run: DEST/bin/python scenario.py READY_JSON
set -euo pipefail
dest=${1:?usage: install.sh DEST}
if [ ! -x "$dest/bin/python" ]; then
  python3 -m venv "$dest"
fi
if ! "$dest/bin/python" -c 'import openai, anthropic' 2>/dev/null; then
  "$dest/bin/python" -m pip install --quiet 'openai==3.63.0' 'anthropic==2.17.0'
fi
