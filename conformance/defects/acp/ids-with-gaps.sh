#!/bin/sh
# Defect: the client's request ids are not consecutive. Between ski's client and its agent, every
# request id N the client writes becomes 1N (0, 1, ..., 9, 10 become 10, 11, ..., 19, 110: a
# gap after 19), and the agent's answers are mapped back, so nothing but the ids changes.
# Usage (as the client's agent command): sh ids-with-gaps.sh <agent command...>
sed -u 's/^\({"jsonrpc":"2.0","id":\)\([0-9][0-9]*\),"method"/\11\2,"method"/' |
    "$@" |
    sed -u 's/^\({"jsonrpc":"2.0","id":\)1\([0-9][0-9]*\),\("result"\|"error"\)/\1\2,\3/'
