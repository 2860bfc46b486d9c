"""The link between the originals and their avatars: whether a verdict can trust it.

Below the plan: it reads a request's sets, link and columns (`sets.LinkedSets`, which a
`polars_hidden_rate.plan.CountPlan` is). From the top: `verdict` (the options, the link's
checks before the read and on it, `Evidence`, and `judged`, which returns a read with its
evidence); `sorted` (the sorted-link rule); `sets` (what the checks read, own copies'
columns, shared keys) and `errors` (the link errors); `link_test` (the statistic: arrays in,
a `LinkTest` out).
"""
