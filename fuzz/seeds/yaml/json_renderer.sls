#!jinja|json
{"id": "{{ grains.id }}", "n": {{ grains.num_cpus }}}
