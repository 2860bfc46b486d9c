"""The release measures: what a release of avatars (or of any generator's synthetic records)
is judged on, one measure a module, each from the coordinate arrays of one space.

Against the originals: `summary` (the hidden rate and local cloaking's figures, from the
counts), `distances` (DCR and NNDR), `row_match` (row direct match protection),
`correlation` (correlation protection rate). The link between originals and avatars:
`polars_hidden_rate.link` holds its checks.
Against a holdout: `holdout` (its checks and space), `membership`, `overfitting` (DCR
overfitting protection), `inference` (with `secrets`, how a secret is judged) and
`linkability` (anonymeter's linkability attack), the two attacks also in anonymeter's own
space (`gower`); a report shares their walks (`walks`, `holdout_figures`). Against random
records: `baseline` (DCR baseline protection). `digits` prints the digits that decide a
verdict. A measure returns its value (its figures, `to_dict`, its lines as text): the report
builds its sections (`polars_hidden_rate.report.sections`).

The public functions are exported by the package itself (`polars_hidden_rate.membership_risk`,
...); this package holds them.
"""
