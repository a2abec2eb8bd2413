{% set work = grains.work %}
{# A command that counts its runs in a file under the work dir and succeeds from run `n` on. #}
{% macro counted(file, n) -%}
expr $(cat {{ work }}/{{ file }} 2>/dev/null || echo 0) + 1 > {{ work }}/{{ file }}; echo "run $(cat {{ work }}/{{ file }})"; test $(cat {{ work }}/{{ file }}) -ge {{ n }}
{%- endmacro %}

first:
  test.succeed_without_changes

{# Each waits a second then looks for the other's start: only true parallel runs see it. #}
sleep_a:
  cmd.run:
    - name: touch {{ work }}/a_started; sleep 1; test -e {{ work }}/b_started && touch {{ work }}/a_done && echo a
    - parallel: True

sleep_b:
  cmd.run:
    - name: touch {{ work }}/b_started; sleep 1; test -e {{ work }}/a_started && touch {{ work }}/b_done && echo b
    - parallel: True

between:
  cmd.run:
    - name: echo between

both:
  cmd.run:
    - name: test -e {{ work }}/a_done && test -e {{ work }}/b_done && echo both done
    - require:
      - cmd: sleep_a
      - cmd: sleep_b

fails:
  cmd.run:
    - name: sleep 0.2; echo failing; exit 3
    - parallel: True

after_fail:
  cmd.run:
    - name: echo unreachable
    - require:
      - cmd: fails

on_fail:
  cmd.run:
    - name: echo handled
    - onfail:
      - cmd: fails

unreferenced:
  cmd.run:
    - name: sleep 0.5; echo late
    - parallel: True

parallel_retry:
  cmd.run:
    - name: '{{ counted("pretry", 2) }}'
    - parallel: True
    - retry:
        attempts: 2
        interval: 0

parallel_retry_exhausted:
  cmd.run:
    - name: '{{ counted("pexh", 99) }}'
    - parallel: True
    - retry:
        attempts: 2
        interval: 0

parallel_retry_met:
  cmd.run:
    - name: echo at once
    - parallel: True
    - retry:
        attempts: 3
        interval: 0

parallel_skipped_by_unless:
  cmd.run:
    - name: echo never
    - unless: 'true'
    - parallel: True

parallel_changes:
  test.succeed_with_changes:
    - parallel: True

watcher:
  cmd.run:
    - name: echo watcher
    - watch:
      - test: parallel_changes

pre_target:
  cmd.run:
    - name: echo pre
    - prereq:
      - cmd: parallel_prereqd

parallel_prereqd:
  cmd.run:
    - name: echo prereqd
    - parallel: True

parallel_check_cmd:
  cmd.run:
    - name: echo checked
    - parallel: True
    - check_cmd:
      - 'false'

last:
  cmd.run:
    - name: echo last
