svc:
  ports: [80, 443]
  opts: {a: 1, b: 1}
only_one: 1
