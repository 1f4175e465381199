# Defect (a filter on what the agent reads): the agent takes every client for one that advertised
# session.compaction, so it sends compaction updates to a client that did not.
s/"terminal":false}/"terminal":false,"session":{"compaction":{}}}/
