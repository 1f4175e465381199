#!/bin/sh
# Installs the TypeScript SDK's v2 (draft) agent and client into DIR (default:
# target/peers/ts-sdk-v2 under the workspace): their scripts, package.json (exact versions of the
# SDK and zod, its one peer dependency) and package-lock.json. tests/acp_v2_interop.rs runs them
# against ski's v2 client, reference agent and mock agent.
set -eu
exec sh "$(dirname "$0")/../npm-install.sh" ts-sdk-v2 "$@"
