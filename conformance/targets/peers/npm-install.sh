#!/bin/sh
# Installs the npm peer NAME (a folder beside this script holding a package.json with exact
# versions, and the peer's own scripts if any) into DIR (default: target/peers/NAME under the
# workspace). Extra npm flags come from NPM_FLAGS. Used by the peers' own install.sh.
set -eu
name=$1
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
dir=${2:-"${CARGO_TARGET_DIR:-$root/target}/peers/$name"}
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
    echo "node and npm are needed for $name; install Node.js 20 or later" >&2
    exit 1
fi
mkdir -p "$dir"
for file in "$here/$name"/*; do
    case $file in
        */install.sh) ;;
        *) cp "$file" "$dir/" ;;
    esac
done
cd "$dir"
# shellcheck disable=SC2086 # NPM_FLAGS is a list of flags
npm install ${NPM_FLAGS:-} --no-audit --no-fund --loglevel=error
echo "installed $name in $dir"
