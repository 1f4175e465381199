# Defect (ACP v2, on what ski acp serve writes): the idle state_update that ends a turn carries no
# stopReason.
s|"state":"idle","stopReason":"[^"]*"|"state":"idle"|
