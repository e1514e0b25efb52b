"""Vector stores and their search: the Vector Stores API (routes.py), what the file_search tool searches
(service.py, search.py), the background ingestion of their files (ingest.py, chunking.py), and the
embeddings endpoint that makes search by meaning possible (embeddings.py); setup.py makes them at start-up.
`filters.py` is imported by the request's shapes, so this package imports nothing here."""
