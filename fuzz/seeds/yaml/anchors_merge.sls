base: &base
  a: 1
  b: 2
derived:
  <<: *base
  b: 3
