hold_hello:
  pkg.held:
    - name: hello

hold_hello_again:
  pkg.held:
    - name: hello
    - version: 2.10-3

hold_sl_only:
  pkg.held:
    - name: only sl
    - pkgs:
      - sl
    - replace: True

nothing_to_hold:
  pkg.held:
    - name: none
    - pkgs: []

release_hello_not_held:
  pkg.unheld:
    - name: hello
    - version: 2.10-3

release_all:
  pkg.unheld:
    - name: everything
    - all: True

nothing_to_release:
  pkg.unheld:
    - name: none
    - pkgs: []
