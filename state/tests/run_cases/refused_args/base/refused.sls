# host.present takes no **kwargs: Salt ends the whole run at a state giving it an argument
# it does not take (after running the states before it), where a function with **kwargs
# (test.nop, file.absent) takes anything.
before:
  test.succeed_with_changes:
    - anything: goes

tolerant:
  file.absent:
    - name: {{ grains.work }}/nothing-here
    - bogus_option: 1

typo:
  host.present:
    - name: h.example
    - ip: 10.1.1.1
    - hosts_file: /nonexistent
    - commnt: typo

after:
  test.nop: []
