"""Shared statistics."""
