users:
  bob: {uid: 1002}
