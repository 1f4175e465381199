# Defect (a filter on what the agent writes): a prompt refused with -32602 (a second prompt while
# the session's turn runs) is answered as a turn that ended end_turn.
s/"error":{"code":-32602,"message":"[^"]*"[^}]*}/"result":{"stopReason":"end_turn"}/
