one:
  test.nop:
    - order: 1
two:
  test.fail_without_changes:
    - order: 2
    - failhard: True
three:
  test.nop:
    - order: 3
