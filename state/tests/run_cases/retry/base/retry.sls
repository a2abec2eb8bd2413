{% set work = grains.work %}
{# A command that counts its runs in a file under the work dir and succeeds from run `n` on
   (it must not start with `word=`: Brine's functions would take it for a keyword argument). #}
{% macro counted(file, n) -%}
expr $(cat {{ work }}/{{ file }} 2>/dev/null || echo 0) + 1 > {{ work }}/{{ file }}; echo "run $(cat {{ work }}/{{ file }})"; test $(cat {{ work }}/{{ file }}) -ge {{ n }}
{%- endmacro %}

succeeds_third:
  cmd.run:
    - name: '{{ counted("third", 3) }}'
    - retry:
        attempts: 5
        interval: 0

after_third:
  cmd.run:
    - name: echo after
    - require:
      - cmd: succeeds_third

succeeds_second_after_a_second:
  cmd.run:
    - name: '{{ counted("second", 2) }}'
    - retry:
        attempts: 3
        interval: 1

until_false:
  cmd.run:
    - name: '{{ counted("until", 99) }} || test $(cat {{ work }}/until) -lt 3'
    - retry:
        until: False
        attempts: 4
        interval: 0

exhausted:
  cmd.run:
    - name: echo never good; exit 4
    - retry:
        attempts: 3
        interval: 0

after_exhausted:
  cmd.run:
    - name: echo unreachable
    - require:
      - cmd: exhausted

retry_true_succeeds:
  cmd.run:
    - name: echo fine
    - retry: True

retry_false_fails:
  cmd.run:
    - name: exit 1
    - retry: False

one_attempt:
  cmd.run:
    - name: exit 1
    - retry:
        attempts: 1
        interval: 0

bad_attempts:
  cmd.run:
    - name: '{{ counted("bad", 5) }}'
    - retry:
        attempts: many
        until: 'yes'
        interval: 0

not_a_map_succeeds:
  cmd.run:
    - name: echo fine too
    - retry: often

empty_comment:
  test.configurable_test_state:
    - result: False
    - changes: False
    - comment: ''
    - retry:
        attempts: 2
        interval: 0

checks_each_attempt:
  cmd.run:
    - name: touch {{ work }}/flag; exit 1
    - unless: test -e {{ work }}/flag
    - retry:
        attempts: 3
        interval: 0

parallel_false_no_retry:
  cmd.run:
    - name: exit 2
    - parallel: False
    - retry:
        attempts: 3
        interval: 0

bad_umask:
  cmd.run:
    - name: echo x
    - umask: zz
    - retry:
        attempts: 3
        interval: 0

last:
  test.succeed_without_changes
