# Under test=True only: what upgrading this machine would change.
everything:
  pkg.uptodate: []
