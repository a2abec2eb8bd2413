started:
  cmd.run:
    - name: sleep 0.5; echo started
    - parallel: True

stops:
  cmd.run:
    - name: exit 1
    - failhard: True

never:
  cmd.run:
    - name: echo never
