# Defect (with delete-kept.sed): the agent's -32601 to the renamed session/delete goes out as a
# success, so session/delete answers {} while the session and its permission memory stay.
s|"error":{"code":-32601,"message":"Method not found","data":{"method":"_kept/session/delete"}}|"result":{}|
