svc:
  ports: [443, 8080]
  opts: {b: 2, c: 2}
only_two: 2
