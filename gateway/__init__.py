"""harmony-gateway: OpenAI Responses and Chat Completions for gpt-oss, with the Harmony loop run here."""

__version__ = "0.1.0"
