a: {{ None }}
b: {{ True }}
c: {{ false }}
d: "{{ [1, 'a', None] }}"
e: "{{ {'k': True} }}"
