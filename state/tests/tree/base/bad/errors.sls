include:
  - nosuch
  - ...toofar
  - nowhere: x
trailing:
  pkg.installed:
two-funs:
  pkg.installed:
    - removed
no-fun:
  pkg:
    - name: foo
not-a-list:
  pkg.installed: foo
bad-req:
  pkg.installed:
    - require: foo
multi-dict:
  pkg.installed:
    - {a: 1, b: 2}
dotted-req:
  pkg.installed:
    - require:
      - pkg.installed: foo
loop-a:
  test.nop:
    - require:
      - test: loop-b
loop-b:
  test.nop:
    - require:
      - test: loop-a
space-fun:
  test.nop:
    - "a b"
names-not-list:
  test.nop:
    - names: one
