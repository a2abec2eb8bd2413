#!jinja|json
{"a": {{ grains.num_cpus }}, "b": "{{ pillar.role }}"}
