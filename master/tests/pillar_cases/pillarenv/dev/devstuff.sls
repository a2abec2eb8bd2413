where: dev
dev: true
