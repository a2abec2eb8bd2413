v: "{{ '{name} is {age}'.format(name='bob', age=3) }}"
