"""vlmcheck.store."""
