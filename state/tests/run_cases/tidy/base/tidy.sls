{%- set w = grains.work %}
old-logs:
  file.tidied:
    - name: {{ w }}/t1
    - age: 5
    - age_size_only: age
    - matches:
      - '.*\.log'
      - '.*\.txt'
    - exclude:
      - keep

big-files:
  file.tidied:
    - name: {{ w }}/t2
    - size: 1KB
    - age_size_only: size

old-and-big:
  file.tidied:
    - name: {{ w }}/t3
    - age: 5
    - size: 1 KiB
    - age_size_logical_operator: and

everything-but-links:
  file.tidied:
    - name: {{ w }}/t4
    - rmdirs: True
    - rmlinks: False
    - full_path_match: True
    - matches:
      - '{{ w }}/t4/.*'

by-mtime:
  file.tidied:
    - name: {{ w }}/t5
    - age: 3
    - time_comparison: mtime
    - age_size_only: age
    - rmdirs: True

nothing-matches:
  file.tidied:
    - name: {{ w }}/t5
    - matches:
      - '^never$'

no-such-dir:
  file.tidied:
    - name: {{ w }}/nope

relative:
  file.tidied:
    - name: relative/dir

prune-recursively:
  file.pruned:
    - name: {{ w }}/p1
    - recurse: True

prune-one:
  file.pruned:
    - name: {{ w }}/p2

prune-not-empty:
  file.pruned:
    - name: {{ w }}/p3

prune-ignoring-errors:
  file.pruned:
    - name: {{ w }}/p4
    - ignore_errors: True

prune-missing:
  file.pruned:
    - name: {{ w }}/p-none
