# Defect (a filter on what the client prints): a current_mode_update is printed with its mode id
# under modeId instead of currentModeId.
/"type":"session_update"/s/"currentModeId"/"modeId"/g
