# Defect (ACP v2, on what ski acp serve writes): no state_update running when a turn starts.
/"sessionUpdate":"state_update","state":"running"/d
