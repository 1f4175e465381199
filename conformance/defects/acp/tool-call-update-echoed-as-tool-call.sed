# Defect (a filter on what the client prints): a tool_call_update the agent sent is printed as a
# tool_call.
/"type":"session_update"/s/"sessionUpdate":"tool_call_update"/"sessionUpdate":"tool_call"/g
