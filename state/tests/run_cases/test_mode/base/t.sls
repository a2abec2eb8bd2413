changes:
  test.succeed_with_changes: []
fails:
  test.fail_without_changes: []
fails_with:
  test.fail_with_changes: []
command:
  cmd.run:
    - name: echo {{ grains.work }}
conf:
  test.configurable_test_state:
    - changes: False
conf_changes:
  test.configurable_test_state: []
conf_fail:
  test.configurable_test_state:
    - result: False
    - allow_test_mode_failure: True
watcher:
  test.nop:
    - watch:
      - test: changes
