{% load_yaml as cfg %}
x: 1
y: [a, b]
{% endload %}
v: {{ cfg|tojson }}
