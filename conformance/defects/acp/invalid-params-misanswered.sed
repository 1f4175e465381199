# Defect (a filter on what the agent writes): invalid params are answered -32603 instead of
# -32602.
s/"code":-32602/"code":-32603/g
