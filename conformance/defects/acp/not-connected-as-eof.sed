# Defect (a filter on what the client's driver prints): a request made after close() ends eof
# instead of not_connected.
/"type":"outcome"/s/"outcome":"not_connected"/"outcome":"eof"/
