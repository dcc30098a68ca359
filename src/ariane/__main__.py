"""``python -m ariane``: the same command line as the ``ariane`` script."""

from __future__ import annotations

from ariane.cli import main

if __name__ == "__main__":
    main()
