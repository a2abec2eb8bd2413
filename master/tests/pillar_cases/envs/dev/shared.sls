shared_dev: true
