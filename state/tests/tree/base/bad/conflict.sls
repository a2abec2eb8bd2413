common-marker:
  file.touch:
    - name: /tmp/other
