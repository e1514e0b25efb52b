"""The Conversations API: a conversation's items, kept with the Harmony messages each stands for."""
