listed: true
