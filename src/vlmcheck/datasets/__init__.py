"""Benchmarks as researchers download them, one module per benchmark and form, read into neutral records; the
contract is :mod:`.base`.  This package imports :mod:`vlmcheck.core` only."""

from .base import (Benchmark, Dataset, DatasetFormError, Form, Record, benchmarks, detect, forms, load, parse_source,
                   path_options, register_benchmark, register_form)

__all__ = ["Benchmark", "Dataset", "DatasetFormError", "Form", "Record", "benchmarks", "detect", "forms", "load",
           "parse_source", "path_options", "register_benchmark", "register_form"]
