{%- set w = grains.work %}
add-b:
  alternatives.install:
    - name: brine-test-alt
    - link: {{ w }}/bin/brine-test-alt
    - path: {{ w }}/b
    - priority: 20

add-a-again:
  alternatives.install:
    - name: brine-test-alt
    - link: {{ w }}/bin/brine-test-alt
    - path: {{ w }}/a
    - priority: 10

add-missing:
  alternatives.install:
    - name: brine-test-alt
    - link: {{ w }}/bin/brine-test-alt
    - path: {{ w }}/missing
    - priority: 5

pick-a:
  alternatives.set:
    - name: brine-test-alt
    - path: {{ w }}/a

pick-a-again:
  alternatives.set:
    - name: brine-test-alt
    - path: {{ w }}/a

pick-nothing:
  alternatives.set:
    - name: brine-test-alt
    - path: {{ w }}/zzz

back-to-auto:
  alternatives.auto:
    - name: brine-test-alt

auto-again:
  alternatives.auto:
    - name: brine-test-alt

drop-b:
  alternatives.remove:
    - name: brine-test-alt
    - path: {{ w }}/b

drop-unregistered:
  alternatives.remove:
    - name: brine-test-alt
    - path: {{ w }}/zzz

no-such-group:
  alternatives.remove:
    - name: brine-test-none
    - path: /nonexistent/brine
