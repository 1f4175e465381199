# Defect (a filter on what the client sends its agent): a write that fails (the path is a
# directory) is answered -32602 instead of -32603 (Internal error).
s/"code":-32603/"code":-32602/g
