{% from 'nginx/map.jinja' import nginx with context %}
nginx:
  pkg.installed:
    - name: {{ nginx.package }}
  user: {{ nginx.user }}
  workers: {{ nginx.worker_processes }}
  conf: {{ nginx.conf_dir }}
