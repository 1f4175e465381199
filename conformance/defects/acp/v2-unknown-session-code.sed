# Defect (ACP v2, on what ski acp serve writes): an unknown session is refused -32603 (internal
# error) instead of -32002 (resource not found).
s|"code":-32002|"code":-32603|
