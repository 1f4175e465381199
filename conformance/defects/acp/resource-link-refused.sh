#!/bin/sh
# Defect: a session/prompt carrying a resource_link block is refused. The conforming agent (the
# mock agent running conforming.toml, "$1") sits behind a filter that renames such a prompt to a
# method the agent does not have, so it answers -32601; every other line passes unchanged.
# Usage: sh resource-link-refused.sh <ski-mock-agent>
corpus=$(dirname "$0")
LC_ALL=C sed -u '/"resource_link"/s|"method" *: *"session/prompt"|"method":"_refused/session/prompt"|' |
    exec "$1" --script "$corpus/conforming.toml"
