#!/bin/sh
# Runs a client command with its stdout passed through a sed script, so that a defect of what the
# client prints can be made from ski's client. The exit status is the client's.
# Usage: sh filter-output.sh <sed script> <client command...>
script=$1
shift
status=$(mktemp)
{ "$@"; echo $? > "$status"; } | sed -u -f "$script"
code=$(cat "$status")
rm -f "$status"
exit "${code:-1}"
