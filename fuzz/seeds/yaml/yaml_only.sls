#!yaml
k: {{ not_rendered }}
