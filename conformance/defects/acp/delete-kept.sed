# Defect (a filter on what the agent reads, with delete-kept-answered.sed on what it writes):
# session/delete reaches the agent under a method it does not have, so the session stays.
s|"method":"session/delete"|"method":"_kept/session/delete"|
