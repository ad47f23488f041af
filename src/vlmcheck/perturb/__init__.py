"""vlmcheck.perturb."""
