{% import_yaml 'fuzz/defaults.yaml' as defaults %}
{% from 'fuzz/map.jinja' import x with context %}
{% set merged = salt['defaults.merge'](defaults, {'a': 1}) if salt is defined else {} %}
key: {{ defaults | tojson }}
