not: [closed
