"""HTTP plumbing every API shares: `body.py` (bounded, strict request bodies), `middleware.py` (request
ids, keys, request metrics), `sse.py` (the streaming response), `http_protocol.py` (uvicorn's protocol
with a request-head timeout)."""
