{% set work = grains.work %}
make_marker:
  cmd.run:
    - name: echo made > {{ work }}/marker; echo done
    - creates: {{ work }}/marker

again_marker:
  cmd.run:
    - name: echo again
    - creates: {{ work }}/marker
    - require:
      - cmd: make_marker

unless_true:
  cmd.run:
    - name: echo never
    - unless: test -e {{ work }}/marker

unless_false:
  cmd.run:
    - name: echo ran unless
    - unless: test -e {{ work }}/nothing

onlyif_false:
  cmd.run:
    - name: echo never
    - onlyif:
      - test -e {{ work }}/nothing

onlyif_true:
  cmd.run:
    - name: echo ran onlyif
    - onlyif: 'true'

failing:
  cmd.run:
    - name: echo out; echo err >&2; exit 3

after_failing:
  cmd.run:
    - name: echo unreachable
    - require:
      - cmd: failing

waiter:
  cmd.wait:
    - name: echo waited
    - watch:
      - cmd: make_marker

waiter_idle:
  cmd.wait:
    - name: echo idle
    - watch:
      - cmd: unless_true

in_cwd:
  cmd.run:
    - name: pwd
    - cwd: {{ work }}

bad_cwd:
  cmd.run:
    - name: pwd
    - cwd: {{ work }}/absent

stateful_cmd:
  cmd.run:
    - name: echo 'changed=yes comment="did it"'
    - stateful: True

checked:
  cmd.run:
    - name: 'false'
    - check_cmd:
      - 'true'

with_env:
  cmd.run:
    - name: echo $GREETING
    - env:
      - GREETING: hi
assignment_first:
  cmd.run:
    - name: c=$(echo assigned); echo $c
    - unless: x=1; test $x = 2
module_run_assignment:
  module.run:
    - cmd.run_stdout:
      - a=b; echo shell ran
      - python_shell: True
    - test.echo:
      - k=v

bracket_unless_relative:
  cmd.run:
    - name: echo never relative
    - cwd: {{ work }}
    - unless: '[ -f marker ]'

negated_onlyif:
  cmd.run:
    - name: echo ran negated
    - onlyif:
      - test ! -d {{ work }}/nothing
      - '[ "{{ grains.id }}" != "" ]'
      - test 3 -lt 12

condition_with_syntax_error:
  cmd.run:
    - name: echo ran after an error
    - unless: test x y

conditions_mixed:
  cmd.run:
    - name: echo never mixed
    - unless:
      - test -e {{ work }}/nothing
      - test -s {{ work }}/marker && true
