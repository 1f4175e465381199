# Defect (a filter on what the agent writes): agent message chunks lose their messageId.
s/,"messageId":"[^"]*"//g
