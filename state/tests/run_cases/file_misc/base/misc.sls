{% set work = grains.work %}
{{ work }}/present:
  file.exists: []
{{ work }}/absent-thing:
  file.exists: []
is-missing:
  file.missing:
    - name: {{ work }}/absent-thing
not-missing:
  file.missing:
    - name: {{ work }}/present
touch-new:
  file.touch:
    - name: {{ work }}/touched
touch-old:
  file.touch:
    - name: {{ work }}/present
touch-deep:
  file.touch:
    - name: {{ work }}/a/b/c
    - makedirs: True
touch-nodir:
  file.touch:
    - name: {{ work }}/nodir/x
touch-relative:
  file.touch:
    - name: relative/x
