{% set d = 'a: [1, 2]\nb: yes'|load_yaml %}
v: {{ d|tojson }}
