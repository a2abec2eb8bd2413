{% import 'nginx/macros.jinja' as m %}
{{ m.pkg('git') }}
