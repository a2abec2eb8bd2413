common-marker:
  file.touch:
    - name: /tmp/common
