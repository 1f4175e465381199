# Defect (a filter on what the agent reads): a relative entry of additionalDirectories is dropped
# before the agent sees it, so session/new with it succeeds instead of being refused.
s/"additionalDirectories":\["relative\/dir"\]/"additionalDirectories":[]/
