{#- The proxy serves every host name; "localhost" goes through it, 127.0.0.1 (in no_proxy)
    does not. Only the proxy has /proxy-only.txt. #}
{% set work = grains.work %}
{% set direct = grains.http %}
{% set proxied = grains.http.replace('127.0.0.1', 'localhost') %}
{% set good = '9347bf9e5b6f42fa181ab19631e9011b836363d3a08b05a8faf318868be5882e' %}

through_proxy:
  file.managed:
    - name: {{ work }}/out/through_proxy
    - makedirs: True
    - source: {{ proxied }}/proxy-only.txt
    - skip_verify: True
served_file_through_proxy:
  file.managed:
    - name: {{ work }}/out/served
    - makedirs: True
    - source: {{ proxied }}/a.txt
    - source_hash: sha256={{ good }}
redirected_through_proxy:
  file.managed:
    - name: {{ work }}/out/redirected
    - makedirs: True
    - source: {{ proxied }}/redirect/a.txt
    - source_hash: sha256={{ good }}
hash_file_through_proxy:
  file.managed:
    - name: {{ work }}/out/hash_file
    - makedirs: True
    - source: {{ proxied }}/a.txt?h=1
    - source_hash: {{ proxied }}/a.txt.sha256
missing_through_proxy:
  file.managed:
    - name: {{ work }}/out/missing
    - makedirs: True
    - source: {{ proxied }}/missing.txt
    - source_hash: sha256={{ good }}
# In no_proxy: fetched from the file server itself, which has no /proxy-only.txt.
not_proxied:
  file.managed:
    - name: {{ work }}/out/not_proxied
    - makedirs: True
    - source: {{ direct }}/proxy-only.txt
    - skip_verify: True
direct_file:
  file.managed:
    - name: {{ work }}/out/direct
    - makedirs: True
    - source: {{ direct }}/a.txt
    - source_hash: sha256={{ good }}
