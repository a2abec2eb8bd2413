dev-thing:
  test.nop
