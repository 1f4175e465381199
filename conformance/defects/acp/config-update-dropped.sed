# Defect (a filter on what the agent writes): no config_option_update reaches the client.
/"config_option_update"/d
