{% for k, v in {'b': 1, 'a': 2}|dictsort %}
{{ k }}: {{ v }}
{% endfor %}
