hello_kept:
  pkg.installed:
    - name: hello
    - hold: True

hello_would_be_released:
  pkg.installed:
    - name: hello
    - hold: False

sl_would_be_held:
  pkg.installed:
    - pkgs:
      - sl
      - hello
    - hold: True

sl_not_held:
  pkg.installed:
    - name: sl
    - hold: False

missing_would_be_installed:
  pkg.installed:
    - name: no-such-package-brine
    - refresh: False
    - hold: True
