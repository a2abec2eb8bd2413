/etc/apache.conf:
  file.managed:
    - source: salt://web/apache.conf
    - require:
      - pkg: apache
