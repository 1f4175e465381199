# Defect (a filter on what the agent writes): no current_mode_update reaches the client.
/"current_mode_update"/d
