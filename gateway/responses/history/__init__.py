"""What a response continues from: the dialog (`dialog.py`: Harmony messages and each tool's state), a
conversation's items (`conversation_items.py`), a thread sent again whole (`thread.py`), the settings
`configuration_update` items set (`settings.py`), and the tools tool search loaded as the model reads them
(`tool_declarations.py`). The dialog a request plans, and its input read into it, are the loop's
(loop/dialog_plan.py, loop/input_items.py): reading input asks each tool how to read its items."""
