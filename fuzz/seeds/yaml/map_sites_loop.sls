{% from 'nginx/map.jinja' import nginx with context %}
{% for name, site in nginx.sites|dictsort %}
site_{{ name }}:
  file.managed:
    - name: /etc/nginx/sites/{{ name }}
    - port: {{ site.port }}
{% endfor %}
