# Defect (a filter on what the agent reads): a prompt carrying an image block is renamed to a
# method the agent does not have, so it answers -32601.
/"type":"image"/s|"method":"session/prompt"|"method":"_refused/session/prompt"|
