{% set m = salt['grains.filter_by']({'Debian-1*': 'new', 'default': 'old'}, grain='osfinger') %}
v: {{ m }}
