"""vlmcheck.core."""
