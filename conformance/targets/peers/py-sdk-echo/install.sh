#!/bin/sh
# Installs the Python SDK echo agent into DIR (default: target/peers/py-sdk-echo under the
# workspace): a virtual environment with the pinned agent-client-protocol, and the agent beside it.
# The profile conformance/targets/py-sdk-echo.toml runs it from there.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../../.." && pwd)
dir=${1:-"${CARGO_TARGET_DIR:-$root/target}/peers/py-sdk-echo"}
python=${PYTHON:-python3}
if ! command -v "$python" >/dev/null 2>&1; then
    echo "python3 is needed for the Python SDK echo agent; install Python 3.10 or later" >&2
    exit 1
fi
mkdir -p "$dir"
"$python" -m venv "$dir/venv"
"$dir/venv/bin/pip" install --quiet --disable-pip-version-check -r "$here/requirements.txt"
cp "$here/echo_agent.py" "$dir/"
echo "installed the Python SDK echo agent in $dir"
