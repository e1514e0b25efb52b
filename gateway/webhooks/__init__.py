"""Webhooks: background responses that report back, as OpenAI's webhook endpoints API does.

`routes.py` is the API (`/v1/webhook_endpoints`, `/v1/webhook_event_types`); the endpoints live in
storage/webhook_store.py. A background response's end writes one delivery per endpoint that wants its event
into the outbox (storage/webhook_outbox.py), in the same transaction as its final record (`outbox.py`);
every replica's `deliverer.py` sends what is due, signed (`signing.py`), where `sender.py`'s guard allows.
"""
