# Defect (a filter on what the client sends its agent): every terminal's exit code is reported
# as 0, whatever the command exited with.
s/"exitCode":[0-9][0-9]*/"exitCode":0/g
