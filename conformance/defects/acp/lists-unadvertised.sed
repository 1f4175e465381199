# Defect (a filter on what the client sends its agent): right after each session/new the client
# also calls session/list, whether or not the agent advertised sessionCapabilities.list.
/"method":"session\/new"/a\
{"jsonrpc":"2.0","id":"ski-defect-list","method":"session/list","params":{}}
