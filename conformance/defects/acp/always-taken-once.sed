# Defect (a filter on what the agent reads): a client's allow_always answer reaches the agent as
# allow_once, so the agent forgets what it was told to remember and asks again.
s|"optionId":"allow_always"|"optionId":"allow_once"|
