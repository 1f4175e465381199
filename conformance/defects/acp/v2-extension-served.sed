# Defect (ACP v2, on what ski acp serve reads): an unknown extension request is served as
# session/list instead of answered -32601.
s|"method":"_ski_conformance/no_such_method"|"method":"session/list"|
