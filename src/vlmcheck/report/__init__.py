"""vlmcheck.report."""
