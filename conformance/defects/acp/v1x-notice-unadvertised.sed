# Defect (a filter on what the agent reads): the agent takes every client for one that advertised
# session.notices, so it sends notices to a client that did not.
s/"terminal":false}/"terminal":false,"session":{"notices":{}}}/
