"""The engine, as the gateway sees it: `client.py` (vLLM's token-in/token-out API: models, generation,
health) over `transport.py` (its HTTP/1.1 on asyncio and httptools: the per-token read); `harmony.py`
(the Harmony encoding and the prompt, tokenised off the event loop when large), `parser.py` (generated
tokens → messages and deltas) and `vocab.py` (the o200k vocabulary, for logprobs)."""
