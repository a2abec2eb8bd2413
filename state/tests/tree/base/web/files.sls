include:
  - ..common
web-files:
  file.recurse:
    - name: /srv/www
    - source: salt://web/www
