# Defect (a filter on what the agent writes): the chunk of one reply (the runner's second turn,
# "second message") loses its messageId while the agent's other chunks keep theirs.
/"text":"second message"/s/,"messageId":"[^"]*"//g
