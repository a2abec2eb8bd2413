compiled-already:
  locale.present:
    - name: C.UTF-8

generated:
  locale.present:
    - name: en_US.UTF-8

not-supported:
  locale.present:
    - name: xx_YY.UTF-8

system:
  locale.system:
    - name: en_US.UTF-8
    - require:
      - locale: generated

show:
  cmd.run:
    - name: cat /etc/default/locale; grep -v '^#' /etc/locale.gen; locale -a
    - order: last
