# Passes every line unchanged (the side of filter-agent.sh that has no defect).
