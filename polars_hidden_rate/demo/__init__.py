"""The demonstration: a seeded cohort the package makes itself, avatarized for several ``k``
and measured (`cohort`), and the plots of its results (`plots`, with the ``plot`` extra).
``hidden-rate demo`` runs it."""
