first:
  test.succeed_with_changes: []

second:
  test.succeed_without_changes:
    - require:
      - test: first

broken:
  test.fail_without_changes:
    - comment: it broke

after_broken:
  test.nop:
    - require:
      - broken

on_fail:
  test.succeed_with_changes:
    - onfail:
      - test: broken

on_fail_not:
  test.nop:
    - onfail:
      - test: first

on_changes:
  test.nop:
    - onchanges:
      - test: first

on_changes_not:
  test.nop:
    - onchanges:
      - test: second

watcher:
  test.succeed_without_changes:
    - watch:
      - test: first

required_in_target:
  test.nop: []

requirer:
  test.nop:
    - require_in:
      - test: required_in_target

watch_in_source:
  test.succeed_with_changes:
    - watch_in:
      - test: watched_by_in

watched_by_in:
  test.nop: []

any_of:
  test.nop:
    - require_any:
      - test: broken
      - test: first

all_fail:
  test.nop:
    - onfail_all:
      - test: broken

ordered_first:
  test.nop:
    - order: 1

ordered_last:
  test.nop:
    - order: last

names_group:
  test.succeed_without_changes:
    - names:
      - n_one
      - n_two:
        - comment: second name

missing_req:
  test.nop:
    - require:
      - test: does_not_exist

sls_req:
  test.nop:
    - require:
      - sls: main

configurable:
  test.configurable_test_state:
    - changes: False
    - result: True
    - comment: configured
    - warnings: careful

notify:
  test.show_notification:
    - text: hello there
