{% from 'nginx/macros.jinja' import pkg, site_name %}
{{ pkg('curl') }}
{{ pkg('vim', '2:9.0') }}
label: {{ site_name('api') }}
