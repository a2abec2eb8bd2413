hello:
  pkg.installed:
    - refresh: False

both:
  pkg.installed:
    - pkgs:
      - hello
      - sl: 5.02-1+b1
    - refresh: False

already_there:
  pkg.installed:
    - name: dpkg

sl_latest:
  pkg.latest:
    - name: sl
    - refresh: False

dpkg_latest:
  pkg.latest:
    - name: dpkg
    - refresh: False

not_installed:
  pkg.removed:
    - name: hello

purge_dpkg_never:
  pkg.purged:
    - name: no-such-package-brine
