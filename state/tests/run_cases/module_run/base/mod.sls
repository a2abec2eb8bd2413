{% set work = grains.work %}
new-style:
  module.run:
    - test.echo:
      - hello
    - test.arg:
      - one
      - two
      - kw: three
new-twice:
  module.run:
    - test.echo:1:
      - first
    - test.echo:2:
      - text: second
new-dict-ret:
  module.run:
    - cmd.run_all:
      - echo out
new-failing-cmd:
  module.run:
    - cmd.run_all:
      - "false"
new-false:
  module.run:
    - test.false: []
new-file:
  module.run:
    - file.write:
      - {{ work }}/written
      - line one
new-missing:
  module.run:
    - no.such_function: []
    - test.true: []
new-bad-args:
  module.run:
    - test.echo: []
new-required-as-keyword:
  module.run:
    - test.echo:
      - text: as keyword
new-too-many:
  module.run:
    - test.echo:
      - one
      - two
legacy:
  module.run:
    - name: test.echo
    - text: legacy hello
legacy-m-name:
  module.run:
    - name: file.touch
    - m_name: {{ work }}/touched
legacy-missing-arg:
  module.run:
    - name: test.echo
legacy-unknown:
  module.run:
    - name: no.such
legacy-args:
  module.run:
    - name: test.arg
    - args: [a, b]
    - kwargs: {x: 1}
legacy-args-not-list:
  module.run:
    - name: test.arg
    - args: notalist
legacy-false:
  module.run:
    - name: test.false
waiting:
  module.wait:
    - name: test.echo
    - text: never
watching:
  module.wait:
    - name: test.echo
    - text: watched
    - watch:
      - module: new-file
