{#- Only for test=True (ini_test): outside a test run Salt's sections_present fails with a
    traceback, and a directory cannot be read. #}
{%- set w = grains.work %}
sections wanted:
  ini.sections_present:
    - name: {{ w }}/sections.ini
    - sections:
        - a
        - z

sections wanted in a missing file:
  ini.sections_present:
    - name: {{ w }}/nothing-here.ini
    - sections:
        - a

# A directory reads as empty in a test run.
directory present:
  ini.options_present:
    - name: {{ w }}
    - sections:
        top: 1
        s:
          k: v

directory sections absent:
  ini.sections_absent:
    - name: {{ w }}
    - sections:
        - a

top-level absent:
  ini.options_absent:
    - name: {{ w }}/remove.ini
    - sections:
        lone: ''
        nothing: ''
