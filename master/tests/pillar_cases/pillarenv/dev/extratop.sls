dev:
  '*':
    - shared
