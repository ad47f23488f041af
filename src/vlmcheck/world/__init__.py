"""The offline reference world: reference models that run without network or GPU."""
