plain: true
role: overridden-by-sls
