# Defect (a filter on what the agent reads): session/resume without additionalDirectories gets the
# session's earlier root (the runner's <cwd>/additional-root) back, as an agent that reactivates
# stored roots implicitly would.
/"method":"session\/resume"/s/"cwd":"\([^"]*\)","mcpServers":\[\]/"additionalDirectories":["\1\/additional-root"],"cwd":"\1","mcpServers":[]/
