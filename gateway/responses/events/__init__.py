"""What a response writes, beneath both the loop and the tools that stand on it: its event log, the
output writer that numbers its items and events, a tool call's item, and the citations a text carries."""
