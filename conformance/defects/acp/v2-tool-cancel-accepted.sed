# Defect (ACP v2, on what ski acp serve writes, with v2-tool-cancel-ignored.sed): the method-not-found
# answer to the renamed tool_call/cancel becomes an empty result, as if it were accepted.
s|"error":{"code":-32601,"message":"Method not found","data":{"method":"_ignored/tool_call/cancel"}}|"result":{}|
