"""Test helpers shipped with vlmcheck (a fake OpenAI-compatible server)."""
