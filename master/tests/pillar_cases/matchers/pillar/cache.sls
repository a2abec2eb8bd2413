cache: {size: 64}
