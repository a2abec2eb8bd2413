stop_before:
  test.succeed_with_changes:
    - prereq:
      - test: change_me
change_me:
  test.succeed_with_changes: []
no_change:
  test.nop: []
prereq_quiet:
  test.succeed_with_changes:
    - prereq:
      - test: no_change
listener:
  test.nop:
    - listen:
      - test: change_me
listen_in_source:
  test.succeed_with_changes:
    - listen_in:
      - test: listened
listened:
  test.nop: []
use_source:
  test.succeed_without_changes:
    - comment: shared comment
use_target:
  test.succeed_without_changes:
    - use:
      - test: use_source
