"""``python -m vlmcheck.cli``: the same as the ``vlmcheck`` command."""

from . import main

if __name__ == "__main__":  # pragma: no cover
    main()
