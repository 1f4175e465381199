# Defect (ACP v2, on what ski acp serve writes): the input of every available command loses its
# type (v2 requires it: text, or a custom type beginning with _).
/"sessionUpdate":"available_commands_update"/s/,"type":"text"}/}/g
