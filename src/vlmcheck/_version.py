"""The version of vlmcheck (read by the build and recorded in every run spec); imports nothing."""

__version__ = "0.1.0"
