"""``python -m polars_hidden_rate.cli``: the ``hidden-rate`` script."""

from polars_hidden_rate.cli import entry

entry()
