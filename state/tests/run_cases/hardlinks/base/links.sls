{%- set w = grains.work %}
new-link:
  file.hardlink:
    - name: {{ w }}/dst/new
    - target: {{ w }}/src/one

already:
  file.hardlink:
    - name: {{ w }}/dst/same
    - target: {{ w }}/src/one

retarget:
  file.hardlink:
    - name: {{ w }}/dst/moved
    - target: {{ w }}/src/two

in-the-way:
  file.hardlink:
    - name: {{ w }}/dst/regular
    - target: {{ w }}/src/one

forced:
  file.hardlink:
    - name: {{ w }}/dst/forced
    - target: {{ w }}/src/two
    - force: True

to-a-directory:
  file.hardlink:
    - name: {{ w }}/dst/adir
    - target: {{ w }}/src/one

from-a-directory:
  file.hardlink:
    - name: {{ w }}/dst/x
    - target: {{ w }}/src

no-target:
  file.hardlink:
    - name: {{ w }}/dst/y
    - target: {{ w }}/src/missing

no-parent:
  file.hardlink:
    - name: {{ w }}/deep/er/link
    - target: {{ w }}/src/one

made-parent:
  file.hardlink:
    - name: {{ w }}/made/er/link
    - target: {{ w }}/src/one
    - makedirs: True

relative:
  file.hardlink:
    - name: rel/link
    - target: src/one

no-such-owner:
  file.hardlink:
    - name: {{ w }}/dst/z
    - target: {{ w }}/src/one
    - user: brine-no-such-user
