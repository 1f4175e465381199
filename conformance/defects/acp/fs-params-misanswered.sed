# Defect (a filter on what the client sends its agent): the client answers an fs request with
# invalid params (a relative path) -32603 instead of -32602 (Invalid params).
s/"code":-32602/"code":-32603/g
