prod:
  'stage:prod':
    - match: grain
    - prodstuff
base:
  'm2':
    - common
