a: {{ pillar|traverse('nginx:sites:default:root') }}
b: {{ pillar|traverse('x:y', 'dflt') }}
