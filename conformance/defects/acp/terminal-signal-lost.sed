# Defect (a filter on what the client sends its agent): a terminal ended by a signal is reported
# with no signal.
s/"signal":"[^"]*"/"signal":null/g
