{#- The proxy refuses these credentials. #}
{% set proxied = grains.http.replace('127.0.0.1', 'localhost') %}

refused_by_proxy:
  file.managed:
    - name: {{ grains.work }}/out/refused
    - makedirs: True
    - source: {{ proxied }}/a.txt
    - skip_verify: True
still_direct:
  file.managed:
    - name: {{ grains.work }}/out/direct
    - makedirs: True
    - source: {{ grains.http }}/a.txt
    - skip_verify: True
