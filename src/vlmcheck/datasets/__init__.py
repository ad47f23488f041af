"""Benchmarks as researchers download them: one small module per benchmark and form, each turning the files on
disk into neutral :class:`~vlmcheck.datasets.base.Record` s that the methods convert into their own items.

This package sits one floor below the methods (it imports :mod:`vlmcheck.core` only).  The contract is in
:mod:`.base`: readers register with :func:`~.base.register_form`, benchmarks with :func:`~.base.register_benchmark`;
:func:`~.base.load` detects the form of a path (or takes the one named) and returns a :class:`~.base.Dataset`.
"""

from .base import (Benchmark, Dataset, DatasetFormError, Form, Record, benchmarks, detect, forms, load, parse_source,
                   path_options, register_benchmark, register_form)

__all__ = ["Benchmark", "Dataset", "DatasetFormError", "Form", "Record", "benchmarks", "detect", "forms", "load",
           "parse_source", "path_options", "register_benchmark", "register_form"]
