"""The OpenAI Responses API: request models, output items and events, the run loop, the routes."""
