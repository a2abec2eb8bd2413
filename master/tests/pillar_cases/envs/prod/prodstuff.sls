where: prod
