ping:
  salt.function:
    - name: test.ping
    - tgt: '*'
multi:
  test.succeed_without_changes:
    - names:
      - one
      - two:
        - comment: hi
