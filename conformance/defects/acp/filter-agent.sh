#!/bin/sh
# Runs an agent command between two sed scripts, one on what the agent reads and one on what it
# writes, so that a defect of ski acp serve's wire can be made from ski acp serve itself.
# Usage: sh filter-agent.sh <sed script for stdin> <sed script for stdout> <agent command...>
in=$1
out=$2
shift 2
sed -u -f "$in" | "$@" | sed -u -f "$out"
