# Defect (a filter on what the agent reads): session/fork reaches the agent under a method it does
# not have, so an agent that advertises fork answers it -32601.
s|"method":"session/fork"|"method":"_refused/session/fork"|
