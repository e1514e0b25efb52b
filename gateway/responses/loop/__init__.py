"""The run of one response (`run.py`): its state (`run_state.py`), each engine call's prompt
(`prompt_builder.py`) and stream (`turn.py`) into the one owner of the output (`output.py`), its end
(`ending.py`); a background run in the store (`durable.py`, `journal.py`, `adoption.py`); the event log
every reader follows (`log.py`, `follow.py`); and what the loop uses on the way (admission, compaction,
tracing, stop sequences, citations, logprobs, sealed blobs)."""
