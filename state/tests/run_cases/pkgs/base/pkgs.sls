hello:
  pkg.installed: []

sl_and_hello:
  pkg.installed:
    - pkgs:
      - hello
      - sl: 5.02-1+b1
    - require:
      - pkg: hello

hello_latest:
  pkg.latest:
    - name: hello

hello_again:
  pkg.installed:
    - name: hello
    - version: 2.10*

sl_removed:
  pkg.removed:
    - name: sl
    - require:
      - pkg: sl_and_hello

hello_purged:
  pkg.purged:
    - name: hello
    - require:
      - pkg: hello_latest

nothing_to_remove:
  pkg.removed:
    - name: no-such-package-brine

unknown_package:
  pkg.installed:
    - name: no-such-package-brine
    - refresh: False

empty_list:
  pkg.installed:
    - pkgs: []
