# Defect (a filter on what the client sends its agent): the client answers a request it does not
# know with -32603 instead of -32601 (Method not found).
s/"code":-32601/"code":-32603/g
