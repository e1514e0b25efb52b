"""What a response continues from: the dialog (`dialog.py`: Harmony messages and each tool's state), the
one a request plans (`dialog_plan.py`), its input read into it (`input_items.py`), a conversation's
items (`conversation_items.py`), a thread sent again whole (`thread.py`), and the tools tool search loaded
as the model reads them (`tool_declarations.py`)."""
