a: {{ [1]|is_list }}
b: {{ 'x'|is_list }}
