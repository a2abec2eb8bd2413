unknown_function:
  test.no_such_function: []
unknown_module:
  nosuchmodule.run: []
fine:
  test.nop: []
loop_a:
  test.nop:
    - require:
      - test: loop_b
loop_b:
  test.nop:
    - require:
      - test: loop_a
self_require:
  test.nop:
    - require:
      - test: self_require
