# Defect (ACP v2, on what ski acp serve writes): an item-based plan_update carries no planId.
s|,"planId":"[^"]*"||
