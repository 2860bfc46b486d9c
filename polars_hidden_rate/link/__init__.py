"""The link between the originals and their avatars: whether a verdict can trust it.

`link_test` (the statistic: own avatars ranked against other records' avatars) under
`verdict` (the checks of a link before and after the read, own copies, `Evidence`).
"""
