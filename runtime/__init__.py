"""What the gateway, its tools and its sandbox share, with no knowledge of any of them: the CPU lane
(`cpu.py`), worker processes for work whose cost the input decides (`isolation.py`), integers read from
text (`numbers.py`) and per-tenant caps with eviction (`quota.py`)."""
