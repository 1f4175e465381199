# Defect (a filter on what the agent reads): fs/read_text_file, a client method, reaches the agent
# as session/list, so the agent answers it as if it were its own.
s|"method":"fs/read_text_file"|"method":"session/list"|
