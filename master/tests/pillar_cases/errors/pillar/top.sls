base:
  '*':
    - good
    - broken_jinja
    - broken_yaml
    - missing
    - a_list
    - bad_include
    - dup_keys
    - undefined_var
  'm2':
    - includes_missing
