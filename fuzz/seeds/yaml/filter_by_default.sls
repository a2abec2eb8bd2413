{% set m = salt['grains.filter_by']({'RedHat': {'p': 'httpd'}, 'default': {'p': 'apache2'}}) %}
pkg: {{ m.p }}
