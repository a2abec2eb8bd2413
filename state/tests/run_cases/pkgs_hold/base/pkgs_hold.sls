hello_held:
  pkg.installed:
    - name: hello
    - refresh: False
    - hold: True

hello_still_held:
  pkg.installed:
    - name: hello
    - hold: True
    - require:
      - pkg: hello_held

hello_released:
  pkg.installed:
    - name: hello
    - hold: False
    - require:
      - pkg: hello_still_held

hello_not_held:
  pkg.installed:
    - name: hello
    - hold: False
    - require:
      - pkg: hello_released

sl_held:
  pkg.installed:
    - pkgs:
      - sl
      - hello
    - refresh: False
    - hold: True
    - require:
      - pkg: hello_not_held

upgrade_while_held:
  pkg.latest:
    - pkgs:
      - sl
    - refresh: False
    - require:
      - pkg: sl_held

both_released:
  pkg.installed:
    - pkgs:
      - sl
      - hello
    - hold: False
    - require:
      - pkg: upgrade_while_held
