a: {{ 'on'|yaml_dquote }}
b: {{ "it's"|yaml_squote }}
