"""The link between the originals and their avatars: whether a verdict can trust it.

Below the plan: it reads a request's sets, link and columns (`verdict.LinkedSets`, which a
`polars_hidden_rate.plan.CountPlan` is). `verdict` (the options, the link's checks before the
read and on it, the link errors, the sorted-link rule, own copies, `Evidence`, and `judged`,
which returns a read with its evidence) over `link_test` (the statistic: arrays in, a
`LinkTest` out).
"""
