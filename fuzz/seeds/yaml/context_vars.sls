sls: {{ sls }}
slspath: '{{ slspath }}'
tpldir: '{{ tpldir }}'
saltenv: {{ saltenv }}
