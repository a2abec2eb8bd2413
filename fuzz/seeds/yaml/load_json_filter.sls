{% set d = '{"a": {"b": [true, null]}}'|load_json %}
v: {{ d.a.b|tojson }}
