"""OpenAI Chat Completions, served by the same Harmony loop as the Responses API."""
