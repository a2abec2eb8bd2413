a: {{ 'yes'|yaml_encode }}
b: {{ 'it''s: x'|yaml_encode }}
c: {{ 12|yaml_encode }}
d: {{ 'plain'|yaml_encode }}
