"""The release measures: what a release of avatars (or of any generator's synthetic records)
is judged on, one measure a module, each from the coordinate arrays of one space.

Against the originals: `summary` (the hidden rate and local cloaking's figures, from the
counts), `distances` (DCR and NNDR), `row_match` (row direct match protection),
`correlation` (correlation protection rate). The link between originals and avatars:
`verdict` (its checks and the evidence beside the counts) over `link_test` (the statistic).
Against a holdout: `holdout` (its checks and space), `membership`, `overfitting` (DCR
overfitting protection) and `inference` (with `secrets`, how a secret is judged), whose walks
a report shares (`walks`, `holdout_figures`). `digits` prints the digits that decide a
verdict.

The public functions are exported by the package itself (`polars_hidden_rate.membership_risk`,
...); this package holds them.
"""
