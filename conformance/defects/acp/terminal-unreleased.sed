# Defect (a filter on what the agent writes): the agent's terminal/release goes out under a method
# no client has, so its terminals are never released.
s|"method":"terminal/release"|"method":"_unreleased/terminal/release"|
