# Defect (ACP v2, on what ski acp serve writes): no state_update requires_action while a
# permission request waits (the running after the answer is kept).
/"sessionUpdate":"state_update","state":"requires_action"/d
