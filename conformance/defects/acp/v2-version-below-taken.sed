# Defect (ACP v2, on what ski acp serve reads): an initialize asking for 0 reaches the agent as one
# asking for 2, so a version below every one it speaks is answered 2 instead of -32022.
s|"protocolVersion":0\([,}]\)|"protocolVersion":2\1|
