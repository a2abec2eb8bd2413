base:
  '*':
    - one
    - two
    - inc
