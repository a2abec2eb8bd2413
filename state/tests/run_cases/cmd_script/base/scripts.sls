{% set work = grains.work %}
with-args-in-name:
  cmd.script:
    - name: {{ work }}/scripts/hello.sh one "two three"
    - cwd: {{ work }}/run
with-args:
  cmd.script:
    - source: {{ work }}/scripts/hello.sh
    - args: a b
failing:
  cmd.script:
    - name: fails
    - source: file://{{ work }}/scripts/fails.sh
    - env:
      - GREETING: hello there
stateful:
  cmd.script:
    - name: {{ work }}/scripts/stateful.sh
    - stateful: True
hidden:
  cmd.script:
    - name: {{ work }}/scripts/quiet.sh
    - hide_output: True
missing:
  cmd.script:
    - source: {{ work }}/scripts/nope.sh
bad-cwd:
  cmd.script:
    - name: {{ work }}/scripts/quiet.sh
    - cwd: {{ work }}/nowhere
bad-env:
  cmd.script:
    - name: {{ work }}/scripts/quiet.sh
    - env: just-a-string
bad-context:
  cmd.script:
    - name: {{ work }}/scripts/quiet.sh
    - context: [1, 2]
skipped:
  cmd.script:
    - name: {{ work }}/scripts/quiet.sh
    - unless: "true"
after-failing:
  test.nop:
    - require:
      - cmd: failing
