where: base
common: true
