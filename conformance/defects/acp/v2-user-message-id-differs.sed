# Defect (ACP v2, on what ski acp serve writes): the user_message update carries another messageId
# than the prompt's acknowledgement.
s|"sessionUpdate":"user_message","messageId":"|"sessionUpdate":"user_message","messageId":"other_|
