# Defect (ACP v2, on what ski acp serve writes): session/prompt is acknowledged with an empty
# result, as the draft's text shows, without the messageId the schema requires.
s|"result":{"messageId":"[^"]*"}|"result":{}|
