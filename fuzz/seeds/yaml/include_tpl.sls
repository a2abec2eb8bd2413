{% include 'nginx/macros.jinja' %}
k: v
