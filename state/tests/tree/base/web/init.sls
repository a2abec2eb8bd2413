include:
  - .config
  - web.files
  - dev: devonly
apache:
  pkg.installed: []
  service.running:
    - enable: True
    - watch:
      - file: /etc/apache.conf
short-form: test.nop
ordered:
  test.succeed_with_changes:
    - order: 1
extend:
  apache:
    service:
      - reload: True
exclude:
  - id: nothing
