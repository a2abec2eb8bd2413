users:
  alice: {uid: 1001}
