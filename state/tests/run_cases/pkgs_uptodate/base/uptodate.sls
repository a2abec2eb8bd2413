# Only packages that are not installed are named: pkg.upgrade upgrades every package (as
# Salt's aptpkg does), so a run without test=True must find nothing to upgrade.
hello-current:
  pkg.uptodate:
    - pkgs:
      - hello
      - sl

bad-refresh:
  pkg.uptodate:
    - refresh: sometimes
