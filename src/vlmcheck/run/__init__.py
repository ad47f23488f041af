"""vlmcheck.run."""
