# Defect (ACP v2, a filter on what ski acp serve reads, with v2-tool-cancel-accepted.sed on what it
# writes): tool_call/cancel reaches the agent under a method it does not have, so the tool call is
# never cancelled.
s|"method":"tool_call/cancel"|"method":"_ignored/tool_call/cancel"|
