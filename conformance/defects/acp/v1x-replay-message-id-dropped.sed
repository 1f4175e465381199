# Defect (a filter on what the agent writes): the user_message_chunks session/load replays lose
# their messageId (v1's live turn streams no user chunk, so only the replay is changed).
/"sessionUpdate":"user_message_chunk"/s/,"messageId":"[^"]*"//g
/"sessionUpdate":"user_message_chunk"/s/"messageId":"[^"]*",//g
