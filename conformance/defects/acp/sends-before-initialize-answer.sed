# Defect (a filter on what the client sends its agent): the client sends a notification right
# behind initialize, before the agent has answered it.
/"method":"initialize"/a\
{"jsonrpc":"2.0","method":"_ski.defect/early","params":{}}
