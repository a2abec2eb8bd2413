dev:
  'stage:dev':
    - match: grain
    - devstuff
include:
  - extratop
