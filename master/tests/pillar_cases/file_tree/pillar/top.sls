base:
  'role:special':
    - match: pillar
    - special
  '*':
    - plain
