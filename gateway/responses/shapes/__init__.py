"""The Responses protocol's shapes: the request's models (`request.py`, and the tools' own:
`shell_models.py`, `tool_search_models.py`, `code_interpreter_models.py`), the output items and their
events (`items.py`), the Response object (`response_object.py`), and the checks of what a client
declares (`schemas.py`: strict functions' JSON Schemas, `grammars.py`: custom tools' grammars)."""
