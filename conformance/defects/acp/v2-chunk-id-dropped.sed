# Defect (ACP v2, on what ski acp serve writes): agent message chunks carry no messageId.
s|"sessionUpdate":"agent_message_chunk","messageId":"[^"]*",|"sessionUpdate":"agent_message_chunk",|
